"""scripts/compare_pretraining.py's verdict table: mean, sample std, gap, the 2σ criterion and which protocol counts,
checked on hand-made results."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_pretraining.py"


@pytest.fixture(scope="module")
def compare():
    spec = importlib.util.spec_from_file_location("compare_pretraining", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _write(workdir: Path, runs: dict[tuple[str, str], list[float]]) -> None:
    with (workdir / "results.jsonl").open("w") as f:
        for (task, init), values in runs.items():
            for seed, v in enumerate(values, 1):
                f.write(
                    json.dumps(
                        {
                            "task": task,
                            "init": init,
                            "seed": seed,
                            "metric": "accuracy",
                            "dev": {"accuracy": v, "eval_loss": 0.5},
                        }
                    )
                    + "\n"
                )


def test_table_mean_std_gap_and_criterion(compare, tmp_path):
    # sst2-full: random 0.79, 0.80, 0.81 -> mean 80.00, sample std 1.00, bar 2.00; pretrained mean 82.10 -> +2.10 yes
    # sst2 (4,000 rows): pretrained behind -> no;  mrpc: gap +1.00 against a bar of 2.00 -> no
    _write(
        tmp_path,
        {
            ("sst2-full", "pretrained"): [0.821, 0.820, 0.822],
            ("sst2-full", "random"): [0.79, 0.80, 0.81],
            ("sst2", "pretrained"): [0.68, 0.69, 0.70],
            ("sst2", "random"): [0.71, 0.72, 0.73],
            ("mrpc", "pretrained"): [0.70, 0.71, 0.72],
            ("mrpc", "random"): [0.69, 0.70, 0.71],
        },
    )
    text = compare.table(tmp_path, ("sst2-full", "mrpc"))
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in text.splitlines() if "(selects)" in line}
    assert rows["sst2-full"][2:7] == ["82.10 ± 0.10", "80.00 ± 1.00", "+2.10", "2.00", "yes"]
    assert rows["sst2"][4] == "-3.00" and rows["sst2"][6] == "no"
    assert rows["mrpc"][4] == "+1.00" and rows["mrpc"][6] == "no"
    assert "on 1 of 2 tasks" in text and "(on each task's first metric; sst2-full, mrpc)" in text
    # the default protocols count sst2 (4,000 rows), not sst2-full
    assert "on 0 of 2 tasks" in compare.table(tmp_path) and (tmp_path / "results.md").exists()


def test_one_random_run_gives_no_verdict(compare, tmp_path):
    _write(tmp_path, {("mrpc", "pretrained"): [0.75], ("mrpc", "random"): [0.70]})
    text = compare.table(tmp_path)
    assert "not yet (one random run)" in text and "on 0 of 1 tasks" in text


def test_table_of_a_workdir_without_results_is_one_error_line(tmp_path):
    """`compare_pretraining.py table --workdir DIR` before the finetune step (or on a mistyped DIR) ended in a
    FileNotFoundError traceback; now one `error:` line naming the file and the step to run."""
    import subprocess

    res = subprocess.run(
        [sys.executable, str(SCRIPT), "table", "--workdir", str(tmp_path)], capture_output=True, text=True
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr == (
        f"error: {tmp_path / 'results.jsonl'} does not exist: run the `finetune` step with --workdir {tmp_path} first "
        "(docs/finetune.md), or give the --workdir it wrote to\n"
    )


def test_sop_nsp_transfer_needs_two_models_of_different_sop_accuracy(tmp_path):
    """scripts/sop_nsp_transfer.py (docs/ablations.md, "scale or bug?"): the slope of NSP on SOP accuracy, with a
    clear error, not a numpy traceback, when fewer than two SOP-trained models of different SOP accuracy qualify;
    and on three hand-made models the least-squares slope of NSP on SOP."""
    import subprocess

    script = SCRIPT.parent / "sop_nsp_transfer.py"

    def rec(cell, sop, nsp):
        return {
            "study": "depth",
            "cell": cell,
            "sop_accuracy": sop,
            "nsp_accuracy": nsp,
            "mlm_loss": sop,
            "nsp_accuracy_label0": 0.5,
            "nsp_accuracy_label1": 0.5,
        }

    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(json.dumps(r) for r in [rec("L1", 0.60, 0.50), rec("nsp", 0.5, 0.65)]) + "\n")
    res = subprocess.run([sys.executable, str(script), str(results)], capture_output=True, text=True)
    assert (
        res.returncode == 1
        and "Traceback" not in res.stderr
        and res.stderr.startswith("error: 1 SOP-trained model(s) with SOP accuracy >= 0.52 in")
    )
    rows = [rec("L1", 0.54, 0.50), rec("L2", 0.58, 0.52), rec("L4", 0.62, 0.54)]  # NSP = 0.5 * SOP + 0.23
    results.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    res = subprocess.run([sys.executable, str(script), str(results)], capture_output=True, text=True)
    assert res.returncode == 0 and "3 distinct SOP-trained models" in res.stdout
    assert "correlation +1.00; slope of NSP on SOP +0.50" in res.stdout
