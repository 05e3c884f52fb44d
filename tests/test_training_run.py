"""The run layer's output-directory policy (litebert.training.run): what a training run may write into, what
evaluate/predict may write over. Directories are laid out by hand here; the commands' own tests run them."""

from __future__ import annotations

import json

import pytest

from litebert.errors import LitebertError
from litebert.training.run import check_no_overwrite, check_output_dir, resolve_resume


def _run_dir(path, command, *, checkpoint=False, finished=None):
    """A run directory of ``command`` as the commands leave it (the files the policy looks at)."""
    path.mkdir(parents=True)
    (path / "run_settings.json").write_text(json.dumps({"command": command, f"{command}_config": {}}))
    (path / "metrics.jsonl").write_text("")
    if checkpoint:
        step = path / "checkpoints" / "step-4"
        step.mkdir(parents=True)
        (step / "COMPLETE").write_text("{}")
    if finished:
        (path / finished).mkdir()
    return path


def _check(out, command="finetune", resume=None, **kw):
    kw.setdefault("finished", "eval_results.json" if command == "finetune" else "final")
    check_output_dir(out, command, resume, **kw)


def test_absent_empty_and_the_callers_own_files_are_fine(tmp_path):
    _check(tmp_path / "new")
    _check(tmp_path / "new", resume="auto")
    (tmp_path / "empty").mkdir()
    _check(tmp_path / "empty")
    # litebert ablate writes its plan and cell config into the cell directory before pretrain runs
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / "ablate_plan.json").write_text("{}")
    (cell / "cell_model_config.json").write_text("{}")
    (cell / ".run_settings.json.tmp-123").write_text("")  # the temporary file of a write cut short
    for resume in (None, "auto"):
        _check(cell, "pretrain", resume, caller_files=("ablate_plan.json", "cell_model_config.json"))
    # ... which is no loophole: the same files from anyone else make the directory non-empty
    with pytest.raises(LitebertError, match=r"is not empty \(holds ablate_plan.json, cell_model_config.json\)"):
        _check(cell, "pretrain")


def test_a_model_directory_and_the_source_itself_are_refused(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    with pytest.raises(LitebertError, match=r"^--output .*model is the --model directory, which the run reads"):
        _check(model, sources={"--model": str(model), "--tokenizer": None})
    for command in ("finetune", "pretrain"):
        for resume in (None, "auto"):
            with pytest.raises(LitebertError, match=r"holds a model \(config.json, model.safetensors\): a run never"):
                _check(model, command, resume)
    with pytest.raises(LitebertError, match=r"is the --data directory"):  # even when it does not exist (yet)
        _check(tmp_path / "d", "pretrain", sources={"--data": tmp_path / "x" / ".." / "d"})


def test_runs_of_another_command_and_other_files_are_refused(tmp_path):
    pre = _run_dir(tmp_path / "pre", "pretrain", checkpoint=True)
    for resume in (None, "auto"):
        with pytest.raises(LitebertError, match=r"holds a `litebert pretrain` run \(run_settings.json\)"):
            _check(pre, "finetune", resume)
    other = tmp_path / "other"
    other.mkdir()
    for i in range(7):
        (other / f"f{i}.txt").write_text("")
    with pytest.raises(LitebertError, match=r"is not empty \(holds f0.txt, f1.txt, f2.txt, f3.txt, f4.txt and 2 more"):
        _check(other)
    with pytest.raises(LitebertError, match=r"holds no `litebert finetune` run to resume \(f0.txt"):
        _check(other, resume="auto")


def test_runs_of_the_same_command(tmp_path):
    # interrupted with a checkpoint: a fresh run is refused, --resume continues
    run = _run_dir(tmp_path / "a", "finetune", checkpoint=True)
    with pytest.raises(LitebertError, match=r"already holds checkpoints \(newest step-4\); pass --resume auto"):
        _check(run)
    _check(run, resume="auto")
    _check(run, resume=str(run / "checkpoints" / "step-4"))
    # interrupted before its first checkpoint: --resume auto starts it over
    run = _run_dir(tmp_path / "b", "finetune")
    with pytest.raises(LitebertError, match=r"interrupted `litebert finetune` run with no checkpoint: pass --resume"):
        _check(run)
    _check(run, resume="auto")
    # finished: a fresh run is refused; --resume continues only from a checkpoint (a larger --max-steps)
    run = _run_dir(tmp_path / "c", "finetune", finished="eval_results.json")
    with pytest.raises(LitebertError, match=r"not empty \(holds a finished `litebert finetune` run \(eval_results"):
        _check(run)
    with pytest.raises(LitebertError, match=r"finished `litebert finetune` run \(eval_results.json\) without checkp"):
        _check(run, resume="auto")
    run = _run_dir(tmp_path / "d", "pretrain", checkpoint=True, finished="final")
    _check(run, "pretrain", "auto")


def test_resume_auto_without_a_checkpoint_says_so(tmp_path):
    said = []
    assert resolve_resume(tmp_path / "new", "auto", log=said.append) is None
    assert said == [f"--resume auto: no checkpoint in {tmp_path / 'new'}, starting from step 0"]


def test_evaluate_and_predict_never_write_over_a_file(tmp_path):
    names = ["predictions.tsv", "eval_results.json", "run_settings.json"]
    check_no_overwrite(tmp_path / "new", "evaluate", names)
    (tmp_path / "notes.txt").write_text("")
    check_no_overwrite(tmp_path, "evaluate", names)  # any directory, as long as nothing is overwritten
    run = _run_dir(tmp_path / "ft", "finetune")
    (run / "predictions.tsv").write_text("")
    with pytest.raises(LitebertError) as exc:
        check_no_overwrite(run, "predict", names)
    assert str(exc.value) == (
        f"--output {run} already holds predictions.tsv (of a `litebert finetune` run), which predict would "
        "overwrite: choose another --output (nothing was written)"
    )
