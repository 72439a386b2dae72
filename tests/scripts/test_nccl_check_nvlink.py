"""aicluster-nccl-check on a multi-node NVLink domain (GB200/GB300 NVL72): a run inside one domain
is an MNNVL all_reduce (NCCL_MNNVL_ENABLE=1, one block: --segment) held to the accelerator's NVLink
figure (nccl_check.yaml nvlink_domain), so a degraded domain fails and its slow tray is drained.
Against the fake sbatch / sinfo / scontrol of test_nccl_check.py, with AWS's P6e-GB200 nodes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from aicluster.catalog import load_catalog
from aicluster.catalog.slurm_release import nccl_check_config, nccl_check_facts
from tests.support.nccl_check import DATA, FAKE_SBATCH, SCRIPT, _Args, check
from tests.support.scontrol_recorder import calls, recorder

NVL = "p6e-gb200.36xlarge"
NODES = [f"gb200-{i}" for i in range(1, 19)]
# all_reduce over MNNVL on 2 GB200 nodes peaked at 811 GB/s (nccl_check.yaml's cross-check); the
# recorded p5 run's table scaled to that peak stands in for it.
MNNVL_PEAK = 811.0


def test_the_nvlink_figures_follow_the_accelerators_nvlink():
    facts = nccl_check_facts()
    assert set(facts.nvlink_domain) >= {"GB200", "GB300"}
    for model, e in facts.nvlink_domain.items():
        acc = load_catalog().accelerators[model]
        assert e.source.startswith("derived") == (e.kind == "derived") and "checked" in e.source
        # NVLink moves at most its one-direction rate per GPU; busbw above it is a typo.
        assert 0 < e.busbw_gbs <= acc.scale_up_gbs
    assert facts.nvlink_domain["GB200"].busbw_gbs == pytest.approx(900 * 0.8)


def test_cluster_json_carries_the_domain_figure_for_nvl72_types_only():
    config = nccl_check_config([NVL, "p5.48xlarge"])
    assert set(config["nvlink_domain"]) == {NVL}
    assert config["nvlink_domain"][NVL]["busbw_gbs"] == pytest.approx(720)
    assert config["nvlink_domain"][NVL]["domain_nodes"] == 18
    assert "nvlink_domain" not in nccl_check_config(["p5.48xlarge"])


@pytest.fixture
def gb200(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sinfo = "#!/bin/sh\n" + "".join(f'echo "{n}|gb200*|{NVL},gpu,gb200,efa|gpu:gb200:4"\n' for n in NODES)
    for name, text in (("sbatch", FAKE_SBATCH), ("sinfo", sinfo)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    _, record = recorder(tmp_path)
    cluster_json = tmp_path / "cluster.json"
    cluster_json.write_text(json.dumps({"cluster": "demo", "nccl_check": nccl_check_config([NVL])}))
    sample = tmp_path / "mnnvl.out"
    factor = MNNVL_PEAK / 487.09
    rows = []
    for line in (DATA / "p5-2node.out").read_text().splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            for i in (6, 7, 10, 11):
                f[i] = f"{float(f[i]) * factor:.2f}"
            line = "  ".join(f)
        rows.append(line)
    sample.write_text("\n".join(rows) + "\n")

    class Slurm:
        scontrol_calls = record

        def configure(self, slow=None):
            (tmp_path / "fake.json").write_text(json.dumps(
                {"nodes": NODES, "slow": slow or {}, "fail": False, "sample": str(sample)}))

        def run(self, *args):
            env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM": str(tmp_path),
                   "AICLUSTER_CLUSTER_JSON": str(cluster_json)}
            return subprocess.run([sys.executable, str(SCRIPT), *args, "--output-dir", str(tmp_path / "out")],
                                  env=env, capture_output=True, text=True, timeout=60)

        def sbatch_calls(self):
            return [json.loads(line) for line in (tmp_path / "sbatch.calls").read_text().splitlines()]

        def job_scripts(self):
            return [p.read_text() for p in (tmp_path / "out").glob("job-*.sbatch")]

    slurm = Slurm()
    slurm.configure()
    return slurm


def test_a_whole_domain_passes_over_nvlink_in_one_block(gb200):
    run = gb200.run("18", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["passed"] and report["nvlink_domain"]
    assert report["expected_gbs"] == pytest.approx(720) and report["busbw_gbs"] == pytest.approx(MNNVL_PEAK, abs=0.1)
    (only,) = gb200.sbatch_calls()
    assert "--segment=18" in only and "--nodes=18" in only and "--gpus-per-node=4" in only


def test_the_job_forces_mnnvl_and_passes_shellcheck(tmp_path):
    text = check.job_script(_Args(), 4, mnnvl=True)
    assert "export NCCL_MNNVL_ENABLE=1" in text and "-x NCCL_MNNVL_ENABLE" in text
    assert "NCCL_MNNVL_ENABLE" not in check.job_script(_Args(), 8)
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    run = subprocess.run([shutil.which("shellcheck"), "--severity=style", str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


def test_a_domain_fallen_back_to_the_network_fails(gb200):
    """IMEX or the fabric down: what NCCL reaches over EFA is a fraction of NVLink's."""
    gb200.configure(slow={n: 0.2 for n in NODES})
    run = gb200.run("18", "--json")
    assert run.returncode == 1
    report = json.loads(run.stdout)
    assert not report["passed"] and report["ratio"] == pytest.approx(811 * 0.2 / 720, abs=0.01)
    assert report["slow_nodes"] == {}      # everyone slow: the domain's fault, nobody named


def test_a_slow_tray_is_found_within_the_domain_and_drained(gb200):
    gb200.configure(slow={"gb200-7": 0.4})
    run = gb200.run("8", "--drain", "--json")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert set(report["slow_nodes"]) == {"gb200-7"} and report["drained"] == ["gb200-7"]
    assert calls(gb200.scontrol_calls) == [["update", "NodeName=gb200-7", "State=DRAIN",
                                            "Reason=aicluster-nccl-check: busbw 324.4 of 720.0 GB/s over NVLink"]]
    # Every pair stays in the domain too: one block each, over NVLink.
    assert all("--segment=2" in c for c in gb200.sbatch_calls()[1:])


def test_network_flag_and_runs_wider_than_a_domain_test_the_network(gb200):
    for args in (("4", "--network"), ("36",)):
        run = gb200.run(*args, "--json")
        report = json.loads(run.stdout)
        assert not report["nvlink_domain"] and report["expected_gbs"] is None, args   # no network figure for the type
        assert not any(a.startswith("--segment") for a in gb200.sbatch_calls()[-1])
