"""`aicluster estimate`: every stack with a workload model and every example answers; the JSON
carries what issue 14 lists; --compare ranks; bad input exits 2 naming the YAML path, never a
traceback."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aicluster.catalog.pricing import tpu_price
from aicluster.cli import EXIT_BAD_INPUT, EXIT_OK, main
from tests.support import BASE_SPEC, ROOT, STACK_FILES

WORKLOADS = sorted((ROOT / "examples" / "workloads").glob("*.yaml"))
STACKS_WITH_MODEL = [p for p in STACK_FILES
                     if (yaml.safe_load(p.read_text())["config"]["aicluster:cluster"].get("workload") or {}).get("model")]
LLAMA3_8B = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256,
             "seq_len": 8192}
LLAMA3_405B = {"layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "ffn_hidden": 53248, "vocab": 128256,
               "seq_len": 8192}


def estimate(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["estimate", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def workload_file(tmp_path: Path, data: dict, name: str = "workload.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_every_stack_describes_a_model():
    assert len(STACKS_WITH_MODEL) == len(STACK_FILES) >= 7


@pytest.mark.parametrize("stack", STACKS_WITH_MODEL, ids=lambda p: p.name)
def test_every_stack_with_a_workload_answers(capsys, stack):
    rc, out, err = estimate(capsys, stack)
    assert rc == EXIT_OK, err
    for line in ("best layout", "throughput", "MFU", "step time", "memory/", "to train", "checkpoint", "data loading"):
        assert line in out, line
    assert stack.name[len("Pulumi."):-len(".yaml")] in out   # the cluster is named


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.name)
def test_every_example_workload_answers(capsys, path):
    rc, out, err = estimate(capsys, path, *(["--compare"] if "compare" in path.name else []))
    assert rc == EXIT_OK, err
    assert out.strip()


def test_json_has_every_key_the_issue_lists(capsys):
    rc, out, err = estimate(capsys, ROOT / "stacks" / "Pulumi.aws-p5-slurm.yaml", "--format", "json")
    assert rc == EXIT_OK, err
    doc = json.loads(out)
    assert set(doc) == {"estimate", "workload", "cluster"}
    e = doc["estimate"]
    for key in ("tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "step_time_s", "memory_per_gpu_gib", "layout",
                "bound", "breakdown_s", "train_days", "train_cost_usd", "checkpoint", "data_loading", "warnings"):
        assert key in e, key
    assert {"weights", "gradients", "optimizer", "activations"} <= set(e["memory_per_gpu_gib"])
    assert {"tp", "pp", "dp", "cp", "ep", "zero_stage", "recompute", "micro_batch", "virtual_stages"} <= set(e["layout"])
    lay = e["layout"]
    assert lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"] == e["accelerators"] == 128   # 16 x p5.48xlarge
    assert 0 < e["mfu"] < 1 and e["step_time_s"] > 0
    assert e["train_days"] > 0 and e["train_cost_usd"] > 0   # tokens given, p5 has a catalog price
    assert e["checkpoint"]["write_s"] > 0                    # the stack has an FSx filesystem
    assert doc["cluster"]["kind"] == "stack" and doc["cluster"]["hardware"]["count"] == 128
    assert doc["cluster"]["storage"]["name"] == "fsx"
    assert doc["workload"]["model"]["layers"] == 80 and doc["workload"]["training"]["tokens"] == 15e12


def test_a_what_if_answers_without_a_filesystem(capsys, tmp_path):
    path = workload_file(tmp_path, {"model": LLAMA3_8B, "training": {"global_batch_seqs": 256, "tokens": 1e12},
                                    "cluster": {"hardware": {"accelerator": "h100", "nodes": 4}}})
    rc, out, err = estimate(capsys, path, "-f", "json")
    assert rc == EXIT_OK, err
    doc = json.loads(out)
    assert doc["cluster"]["kind"] == "what-if" and doc["cluster"]["storage"] is None
    assert doc["estimate"]["accelerators"] == 32
    assert doc["estimate"]["checkpoint"]["write_s"] is None
    assert any("no filesystem" in w for w in doc["estimate"]["warnings"])
    # No region on paper: priced at us-east-1 on-demand, and the warnings say so (catalog.pricing).
    assert any(w.startswith("what-if: no region given, so us-east-1 on-demand list price")
               for w in doc["estimate"]["warnings"])


def test_a_tpu_what_if_is_priced_per_chip_at_the_reference_region(capsys, tmp_path):
    """A TPU slice on paper is priced as a GPU what-if is: us-central1 on-demand per chip-hour, said
    so (it had no dollars at all before)."""
    path = workload_file(tmp_path, {"model": LLAMA3_8B, "training": {"global_batch_seqs": 256, "tokens": 1e12},
                                    "cluster": {"hardware": {"accelerator": "v5p", "nodes": 16}}})
    rc, out, err = estimate(capsys, path, "-f", "json")
    assert rc == EXIT_OK, err
    e = json.loads(out)["estimate"]
    chip_hour = tpu_price("v5p", "us-central1").usd_per_hour
    assert e["accelerators"] == 64 and e["usd_per_hour"] == pytest.approx(64 * chip_hour)
    assert e["train_cost_usd"] == pytest.approx(64 * chip_hour * 24 * e["train_days"], rel=1e-6)
    assert any(w.startswith("what-if: no region given, so us-central1 on-demand list price per chip-hour")
               for w in e["warnings"]), e["warnings"]


def test_more_nodes_train_faster(capsys, tmp_path):
    """The command passes the what-if's size through: 8x the nodes, fewer days."""
    days = []
    for nodes in (2, 16):
        path = workload_file(tmp_path, {"model": LLAMA3_8B, "training": {"global_batch_seqs": 512, "tokens": 1e12},
                                        "cluster": {"hardware": {"accelerator": "h100", "nodes": nodes}}})
        rc, out, err = estimate(capsys, path, "-f", "json")
        assert rc == EXIT_OK, err
        days.append(json.loads(out)["estimate"]["train_days"])
    assert days[1] < days[0] / 4


def test_a_spec_path_is_relative_to_the_workload_file(capsys, tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.yaml").write_text(yaml.safe_dump(BASE_SPEC))
    path = workload_file(tmp_path, {"model": LLAMA3_8B, "cluster": {"spec": "specs/mine.yaml"}})
    rc, out, err = estimate(capsys, path, "-f", "json")
    assert rc == EXIT_OK, err
    doc = json.loads(out)
    assert doc["cluster"]["kind"] == "spec" and doc["cluster"]["hardware"]["count"] == 128
    # The workload file's checkpoint settings, not the spec's, size the checkpoint budget.
    assert doc["cluster"]["storage"]["checkpoint_interval_min"] == 30


def test_compare_ranks_by_time_and_by_cost_and_lists_what_does_not_fit(capsys, tmp_path):
    path = workload_file(tmp_path, {
        "model": LLAMA3_405B, "training": {"global_batch_seqs": 1024, "tokens": 15e12},
        "cluster": {"hardware": {"accelerator": "h100", "nodes": 64}},
        "clusters": [{"hardware": {"accelerator": "b200", "nodes": 64}},
                     {"hardware": {"accelerator": "a100", "nodes": 1}},     # 405 B on 8 x 40 GB: nothing fits
                     {"hardware": {"accelerator": "h100", "nodes": 16}}]})
    rc, out, err = estimate(capsys, path, "--compare", "-f", "json")
    assert rc == EXIT_OK, err
    doc = json.loads(out)
    entries = doc["comparison"]
    assert len(entries) == 4
    fits = [e for e in entries if e["estimate"] is not None]
    assert [e["rank_by_time"] for e in fits] == list(range(1, len(fits) + 1))
    days = [e["estimate"]["train_days"] for e in fits]
    assert days == sorted(days)
    assert doc["fastest"] == fits[0]["cluster"]["label"]
    priced = sorted((e for e in fits if e["usd_per_million_tokens"] is not None),
                    key=lambda e: e["usd_per_million_tokens"])
    assert doc["cheapest"] == priced[0]["cluster"]["label"]
    assert [e["rank_by_cost"] for e in priced] == list(range(1, len(priced) + 1))
    a100 = next(e for e in entries if e["cluster"]["label"] == "what-if 1 x a100")
    assert a100["estimate"] is None and a100["error"] and a100["rank_by_time"] is None
    assert entries[-1] is a100 or entries[-1]["estimate"] is None   # what does not fit comes last
    # 64 nodes are faster than 16 of the same
    order = [e["cluster"]["label"] for e in fits]
    assert order.index("what-if 64 x h100") < order.index("what-if 16 x h100")

    rc, out, err = estimate(capsys, path, "--compare")
    assert rc == EXIT_OK, err
    assert "does not fit" in out and "fastest:" in out and "cheapest:" in out


def test_compare_of_a_stack_file_is_its_one_cluster(capsys):
    rc, out, err = estimate(capsys, ROOT / "stacks" / "Pulumi.aws-p4d-small.yaml", "--compare", "-f", "json")
    assert rc == EXIT_OK, err
    doc = json.loads(out)
    assert [e["cluster"]["label"] for e in doc["comparison"]] == ["aws-p4d-small"] == [doc["fastest"]]


@pytest.mark.parametrize("data, path, shown", [
    ({"modle": LLAMA3_8B, "cluster": {"stack": "aws-p5-slurm"}}, "modle", "did you mean model?"),
    ({"model": LLAMA3_8B | {"hiden": 1}, "cluster": {"stack": "aws-p5-slurm"}}, "model.hiden", "did you mean hidden?"),
    ({"model": LLAMA3_8B, "cluster": {"stack": "aws-p5-slurn"}}, "cluster.stack", "did you mean aws-p5-slurm?"),
    ({"model": LLAMA3_8B, "cluster": {"hardware": {"accelerator": "h1000", "nodes": 2}}},
     "cluster.hardware.accelerator", "did you mean"),
    ({"model": LLAMA3_8B, "cluster": {"hardware": {"accelerator": "h100", "nodes": 0}}},
     "cluster.hardware.nodes", ">= 1"),
    ({"model": LLAMA3_8B, "cluster": {"stack": "aws-p5-slurm", "hardware": {"accelerator": "h100", "nodes": 2}}},
     "cluster", "exactly one of"),
    ({"model": LLAMA3_8B, "cluster": {"spec": "nowhere.yaml"}}, "cluster.spec", "no file"),
    ({"model": LLAMA3_8B, "clusters": [{"stack": "aws-p5-slurm"}, {"stak": "x"}]}, "clusters[1].stak",
     "did you mean stack?"),
    ({"model": LLAMA3_8B}, "cluster", "where to estimate"),
    ({"model_params_b": 8, "cluster": {"stack": "aws-p5-slurm"}}, "model", "no step time"),
    ({"model": LLAMA3_8B | {"kv_heads": 5}, "cluster": {"stack": "aws-p5-slurm"}}, "model.kv_heads", "divisor"),
    ({"model": LLAMA3_8B, "training": {"global_batch_seqs": 8, "precision": "fp4"},
      "cluster": {"stack": "aws-p5-slurm"}}, "training.precision", "bf16, fp8"),
    ({"model": LLAMA3_8B, "parallelism": {"tp": 3}, "cluster": {"stack": "aws-p5-slurm"}}, "parallelism", ""),
    ({"model": LLAMA3_405B, "cluster": {"hardware": {"accelerator": "a100", "nodes": 1}}}, "parallelism", ""),
    (["model"], "<root>", "a mapping"),
])
def test_bad_input_exits_2_naming_the_path(capsys, tmp_path, data, path, shown):
    rc, out, err = estimate(capsys, workload_file(tmp_path, data))
    assert rc == EXIT_BAD_INPUT, (out, err)
    assert "Traceback" not in err and "internal error" not in err
    assert f"{path}" in err and shown in err, err


def test_clusters_alone_need_compare(capsys, tmp_path):
    path = workload_file(tmp_path, {"model": LLAMA3_8B, "clusters": [{"stack": "aws-p5-slurm"}]})
    rc, _, err = estimate(capsys, path)
    assert rc == EXIT_BAD_INPUT and "cluster:" in err and "--compare" in err
    rc, out, err = estimate(capsys, path, "--compare")
    assert rc == EXIT_OK, err


def test_a_stack_without_a_model_names_the_missing_section(capsys, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(BASE_SPEC))     # workload: {model_params_b: 70}
    rc, _, err = estimate(capsys, spec)
    assert rc == EXIT_BAD_INPUT and "workload.model" in err


def test_a_bad_layout_in_a_stack_names_the_spec_path(capsys, tmp_path):
    spec = dict(BASE_SPEC, workload={"model": LLAMA3_8B, "parallelism": {"tp": 3}})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    rc, _, err = estimate(capsys, path)
    assert rc == EXIT_BAD_INPUT and "workload.parallelism" in err and str(path) in err


@pytest.mark.parametrize("target", ["missing.yaml", "."])
def test_a_file_that_cannot_be_read_exits_2(capsys, tmp_path, target):
    rc, _, err = estimate(capsys, tmp_path / target)
    assert rc == EXIT_BAD_INPUT and "FILE" in err and "Traceback" not in err


def test_the_installed_command_answers_in_json():
    exe = shutil.which("aicluster", path=str(Path(sys.executable).parent))
    assert exe, "the console script is installed next to the interpreter"
    run = subprocess.run([exe, "estimate", "examples/workloads/llama3-70b.yaml", "--format", "json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["estimate"]["tokens_per_s_per_gpu"] > 0
    bad = subprocess.run([exe, "estimate", "stacks/Pulumi.nope.yaml"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "FILE" in bad.stderr


def test_compare_of_a_large_moe_says_which_term_moved_and_why(capsys):
    """Issue 28 item 5: H200 vs B200 vs GB200 NVL72 for a DeepSeek-V3-like MoE. The ranking comes
    with the step-time terms that moved against the slowest cluster, and GB200's line says the
    NVLink domain made its expert group of more than 8 GPUs possible."""
    rc, out, err = estimate(capsys, ROOT / "examples" / "workloads" / "deepseek-v3-nvl72-compare.yaml", "--compare")
    assert rc == EXIT_OK, err
    rows = [line for line in out.splitlines() if line[:3].strip().isdigit()]
    assert [r.split()[4] for r in rows] == ["gb200", "b200", "h200"]
    why = out.split("why (step time per term against the slowest, same global batch):")[1]
    gb200 = next(line for line in why.splitlines() if "144 x gb200" in line)
    assert "against what-if 72 x h200" in gb200 and "compute " in gb200 and "expert all-to-all " in gb200
    assert "the NVLink domain made this layout possible" in gb200 and "inside one 72-GPU NVLink domain" in gb200
    b200 = next(line for line in why.splitlines() if "72 x b200" in line)
    assert "NVLink domain made" not in b200
    rc, out, err = estimate(capsys, ROOT / "examples" / "workloads" / "deepseek-v3-nvl72-compare.yaml", "--compare",
                            "--format", "json")
    data = json.loads(out)
    first = data["comparison"][0]
    assert first["estimate"]["layout"]["ep"] * first["estimate"]["layout"]["tp"] > 8
    assert "the NVLink domain made this layout possible" in first["why"]


def test_compare_keeps_every_clusters_warnings(capsys):
    """Issue 29 item 5: a ranking printed no warning at all; each cluster's now follow the table."""
    rc, out, err = estimate(capsys, ROOT / "examples" / "workloads" / "deepseek-v3-nvl72-compare.yaml", "--compare")
    assert rc == EXIT_OK, err
    block = out.split("warnings, by cluster:")[1]
    assert "no MoE measurement" in block
    for label in ("144 x gb200", "72 x b200", "72 x h200"):
        assert label in block
