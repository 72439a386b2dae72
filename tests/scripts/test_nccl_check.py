"""aicluster-nccl-check (aicluster/node/bin/aicluster-nccl-check): it parses nccl-tests' output,
judges the bus bandwidth against the catalog's figure for the instance type, and, when the run is
slow, finds the slow nodes by pair tests and drains them, all against a fake sbatch, sinfo and
scontrol on PATH (no GPU needed). Recorded outputs: tests/data/nccl/README.md."""
from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys

import pytest

from aicluster.catalog import load_catalog
from aicluster.catalog.slurm_release import nccl_check_config, nccl_check_facts
from tests.support.nccl_check import DATA, FAKE_SBATCH, SCRIPT, _Args, check
from tests.support.scontrol_recorder import calls, recorder

P5 = check.expectation(nccl_check_config(["p5.48xlarge"]), "p5.48xlarge", None)


# --- parsing ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["p5-2node.out", "p5-2node-srun-label.out"])
def test_parses_the_table_and_the_average(name):
    result = check.parse((DATA / name).read_text())
    assert len(result.rows) == 32
    assert result.rows[0].size == 8 and result.rows[-1].size == 17179869184
    assert result.rows[-1].busbw == 487.09 and result.rows[-1].busbw_in_place == 487.26
    assert result.avg_busbw == 124.3231
    assert result.wrong == 0
    # The peak at >= 1 GiB is the 16 GiB row; the small sizes (latency-bound) do not count.
    assert result.peak_busbw(1 << 30) == 487.09


def test_wrong_values_fail_the_check_whatever_the_bandwidth():
    result = check.parse((DATA / "p5-2node-wrong.out").read_text())
    assert result.wrong == 2 + 2          # the row's #wrong and the out-of-bounds count
    ok, measured, ratio = check.verdict(result, P5)
    assert ratio == pytest.approx(1.0) and not ok


def test_output_without_a_table_is_not_a_result():
    with pytest.raises(check.NotRun):
        check.parse("srun: error: Unable to create step for job 12: Invalid generic resource (gres) specification\n")


def test_wrong_is_na_when_the_run_does_not_check():
    line = " 1073741824     268435456     float     sum      -1   4607.6  233.04  436.95     N/A   4565.6  235.18  440.96     N/A"
    assert check.parse(line).rows[0].wrong == 0


# --- verdict -----------------------------------------------------------------------------------

def test_the_published_p5_run_passes_against_the_catalog():
    ok, measured, ratio = check.verdict(check.parse((DATA / "p5-2node.out").read_text()), P5)
    assert ok and measured == 487.09 and ratio == pytest.approx(1.0)


def test_a_run_at_half_the_expectation_fails():
    slow = (DATA / "p5-2node.out").read_text().replace("487.09", "243.50").replace("479.28", "240.00") \
        .replace("465.87", "230.00").replace("443.72", "220.00").replace("436.95", "210.00")
    ok, measured, ratio = check.verdict(check.parse(slow), P5)
    assert not ok and measured == 243.5 and ratio == pytest.approx(0.5, abs=0.01)


def test_no_expected_figure_checks_errors_only():
    exp = check.expectation(nccl_check_config(["g5.48xlarge"]), "g5.48xlarge", None)
    assert exp.busbw is None
    assert check.verdict(check.parse((DATA / "p5-2node.out").read_text()), exp)[0]


# --- bisection ---------------------------------------------------------------------------------

def _measure(slow: dict[str, float], full: float = 487.0):
    def measure(pair):
        return full * min(slow.get(n, 1.0) for n in pair)
    return measure


@pytest.mark.parametrize("nodes, slow", [
    (["gpu-1", "gpu-2", "gpu-3", "gpu-4"], {"gpu-3"}),
    (["gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"], {"gpu-5"}),
    (["gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6"], {"gpu-2", "gpu-3"}),
])
def test_bisection_names_exactly_the_slow_nodes(nodes, slow):
    found, log = check.bisect(nodes, _measure({n: 0.4 for n in slow}), P5)
    assert set(found) == slow
    assert all(bw == pytest.approx(487.0 * 0.4) for bw in found.values())


def test_both_nodes_of_a_pair_slow_are_both_found():
    found, _ = check.bisect(["gpu-1", "gpu-2", "gpu-3", "gpu-4"], _measure({"gpu-1": 0.3, "gpu-2": 0.3}), P5)
    assert set(found) == {"gpu-1", "gpu-2"}


def test_a_fabric_wide_slowdown_names_no_node():
    nodes = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    found, log = check.bisect(nodes, _measure({n: 0.3 for n in nodes}), P5)
    assert found == {} and any("not one node" in line for line in log)


def test_a_pair_that_cannot_run_is_suspect_not_proof():
    # gpu-4's pair did not run; re-paired with a fast node it is fine, so nobody is slow.
    def measure(pair):
        return None if pair == ["gpu-3", "gpu-4"] else 480.0
    assert check.bisect(["gpu-1", "gpu-2", "gpu-3", "gpu-4"], measure, P5)[0] == {}


# --- the program against a fake Slurm ----------------------------------------------------------

SINFO = ("#!/bin/sh\n"
         + "".join(f'echo "gpu-{i}|gpu*|p5.48xlarge,gpu,h100,efa,dynamic|gpu:h100:8"\n' for i in range(1, 7))
         + 'echo "cpu-1|cpu|m7i.4xlarge,dynamic|(null)"\n')


@pytest.fixture
def slurm(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("sinfo", SINFO)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    _, record = recorder(tmp_path)
    cluster_json = tmp_path / "cluster.json"
    cluster_json.write_text(json.dumps({"cluster": "demo", "nccl_check": nccl_check_config(["p5.48xlarge"])}))

    class Slurm:
        scontrol_calls = record
        out_dir = tmp_path / "out"

        def configure(self, slow=None, fail=False, sample="p5-2node.out"):
            (tmp_path / "fake.json").write_text(json.dumps({
                "nodes": [f"gpu-{i}" for i in range(1, 7)], "slow": slow or {}, "fail": fail,
                "sample": str(DATA / sample)}))

        def run(self, *args):
            env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM": str(tmp_path),
                   "AICLUSTER_CLUSTER_JSON": str(cluster_json)}
            return subprocess.run([sys.executable, str(SCRIPT), *args, "--output-dir", str(self.out_dir)],
                                  env=env, capture_output=True, text=True, timeout=60)

        def sbatch_calls(self):
            return [json.loads(line) for line in (tmp_path / "sbatch.calls").read_text().splitlines()]

    slurm = Slurm()
    slurm.configure()
    return slurm


def test_a_healthy_fabric_passes_with_one_job(slurm):
    run = slurm.run("4", "--partition", "gpu")
    assert run.returncode == 0, run.stderr
    assert "PASS" in run.stdout and "ratio 1.00" in run.stdout
    (only,) = slurm.sbatch_calls()
    for flag in ("--wait", "--nodes=4", "--ntasks-per-node=8", "--gpus-per-node=8", "--exclusive", "--partition=gpu"):
        assert flag in only
    assert calls(slurm.scontrol_calls) == []


def test_a_slow_node_is_named_and_drained(slurm):
    slurm.configure(slow={"gpu-3": 0.4})
    run = slurm.run("4", "--drain", "--json")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert not report["passed"] and report["ratio"] == pytest.approx(0.4, abs=0.01)
    assert set(report["slow_nodes"]) == {"gpu-3"} and report["drained"] == ["gpu-3"]
    assert calls(slurm.scontrol_calls) == [["update", "NodeName=gpu-3", "State=DRAIN",
                                            "Reason=aicluster-nccl-check: busbw 194.8 of 487.1 GB/s"]]
    # One 4-node run, two pairs, one re-pairing of each node of the slow pair.
    nodelists = [a for c in slurm.sbatch_calls() for a in c if a.startswith("--nodelist=")]
    assert len(slurm.sbatch_calls()) == 1 + 2 + 2 and len(nodelists) == 4


def test_without_drain_slow_nodes_are_only_reported(slurm):
    slurm.configure(slow={"gpu-2": 0.5})
    run = slurm.run("4")
    assert run.returncode == 1
    assert "SLOW gpu-2: busbw 243.5 of 487.1 GB/s" in run.stdout
    assert calls(slurm.scontrol_calls) == []


def test_one_node_checks_errors_only(slurm):
    slurm.configure(slow={"gpu-1": 0.4})       # NVLink alone: no fabric figure applies
    run = slurm.run("1", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["passed"] and report["expected_gbs"] is None and report["slow_nodes"] == {}


def test_a_job_that_cannot_be_submitted_exits_3(slurm):
    slurm.configure(fail=True)
    run = slurm.run("2")
    assert run.returncode == 3
    assert "Requested node configuration is not available" in run.stderr


def test_bad_usage_exits_2(slurm):
    assert slurm.run("0").returncode == 2
    assert slurm.run("2", "--nodelist", "gpu-1").returncode == 2


# --- the job script and the program itself ------------------------------------------------------

@pytest.mark.parametrize("args", [_Args(), _Args(binary="/opt/x y/all_reduce_perf"),
                                  _Args(container_image="nvcr.io#nvidia/pytorch:25.01-py3")])
def test_the_job_script_passes_shellcheck(args, tmp_path):
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required for this test"
    script = tmp_path / "job.sbatch"
    script.write_text(check.job_script(args, 8))
    run = subprocess.run([shellcheck, "--severity=style", str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    assert "all_reduce_perf" in script.read_text() and "-b 8 -e 16G -f 2 -g 1" in script.read_text()


def test_the_container_job_runs_through_pyxis():
    text = check.job_script(_Args(container_image="nvcr.io#nvidia/pytorch:25.01-py3"), 8)
    assert "srun --mpi=pmix --container-image='nvcr.io#nvidia/pytorch:25.01-py3' all_reduce_perf_mpi" in text


def test_the_program_compiles(tmp_path):
    py_compile.compile(str(SCRIPT), doraise=True, cfile=str(tmp_path / "check.pyc"))


# --- the expectations in the catalog ------------------------------------------------------------

def test_every_expectation_is_sourced_and_derived_ones_follow_the_line_rate():
    facts = nccl_check_facts()
    assert 0 < facts.drain_ratio < facts.pass_ratio <= 1
    assert {"p5.48xlarge", "p4d.24xlarge", "a3-megagpu-8g", "a3-ultragpu-8g"} <= set(facts.expectations)
    for name, e in facts.expectations.items():
        assert e.source.strip() and e.kind in ("measured", "derived")
        assert e.source.startswith("derived") == (e.kind == "derived"), name
        t = load_catalog().find(name)
        line_rate = (t.gpu_network_gbps if t.cloud == "gcp" else t.network_gbps) / 8
        # On 2 nodes a ring of 16 ranks puts algbw on each node's NICs and reports busbw =
        # algbw x 2(16-1)/16, so busbw stays below 1.875x the line rate; more is a typo.
        assert 0 < e.busbw_gbs <= 1.875 * line_rate, name
    assert nccl_check_facts().expectations["a3-megagpu-8g"].busbw_gbs == pytest.approx(1600 / 8 * 0.8)


def test_the_head_ships_the_check():
    from aicluster.render.slurm_files import HEAD_PROGRAMS, published_keys
    assert HEAD_PROGRAMS["aicluster-nccl-check"] == "aicluster-nccl-check"
    assert "bin/aicluster-nccl-check" in published_keys([])
