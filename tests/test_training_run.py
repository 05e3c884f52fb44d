"""The run layer's output-directory policy (litebert.training.run): what a training run may write into, what
evaluate/predict may write over. Directories are laid out by hand here; the commands' own tests run them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.modeling import AlbertForMaskedLM, AlbertForPreTraining, AlbertForSequenceClassification
from litebert.training.run import (
    check_checkpoint_fits,
    check_no_overwrite,
    check_output_dir,
    check_resume_settings,
    resolve_resume,
    run_command,
    run_settings,
    state_mismatch,
    write_run_settings,
)


def _run_dir(path, command, *, checkpoint=False, finished=None, model=None):
    """A run directory of ``command`` as the commands leave it (the files the policy looks at); ``model``: the
    model directory it made (``best``, ``final``), with its ``config.json``."""
    path.mkdir(parents=True)
    (path / "run_settings.json").write_text(json.dumps({"command": command, f"{command}_config": {}}))
    (path / "metrics.jsonl").write_text("")
    if checkpoint:
        step = path / "checkpoints" / "step-4"
        step.mkdir(parents=True)
        (step / "COMPLETE").write_text("{}")
    if model:
        (path / model).mkdir()
        (path / model / "config.json").write_text("{}")
    if finished and not (path / finished).exists():
        (path / finished).mkdir()
    return path


def _check(out, command="finetune", resume=None, **kw):
    kw.setdefault("finished", "eval_results.json" if command == "finetune" else "final")
    if command == "finetune":
        kw.setdefault("model", "best")
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
    with pytest.raises(LitebertError, match=r"holds a finished `litebert finetune` run \(eval_results.json\): choose"):
        _check(run)
    with pytest.raises(LitebertError, match=r"finished `litebert finetune` run \(eval_results.json\) without checkp"):
        _check(run, resume="auto")
    run = _run_dir(tmp_path / "d", "pretrain", checkpoint=True, finished="final")
    _check(run, "pretrain", "auto")


def test_a_finished_run_that_cannot_be_extended_is_not_resumed(tmp_path):
    """Defect: `finetune --resume auto` on a finished run that kept its checkpoints was accepted and rewrote its
    eval_results.json and predictions (finetune's steps cannot grow, so there is nothing to continue). Without
    ``may_extend`` such a run is refused like a fresh run into it; pretrain's finished runs still continue."""
    run = _run_dir(tmp_path / "ft", "finetune", checkpoint=True, finished="eval_results.json")
    for resume in ("auto", str(run / "checkpoints" / "step-4")):
        with pytest.raises(LitebertError) as exc:
            _check(run, resume=resume, may_extend=False)
        assert str(exc.value) == (
            f"--output {run} holds a finished `litebert finetune` run (eval_results.json): a finished run is not "
            "resumed, so its results stay as they are; choose a new or empty --output (nothing was written)"
        )
    _check(_run_dir(tmp_path / "ft2", "finetune", checkpoint=True), resume="auto", may_extend=False)  # unfinished
    run = _run_dir(tmp_path / "pre", "pretrain", checkpoint=True, finished="final")
    _check(run, "pretrain", "auto", may_extend=True)


def test_a_fresh_run_into_a_finished_run_is_told_it_is_finished_not_to_resume(tmp_path):
    """Defect: rerunning `finetune` into a finished run that kept its checkpoints said "already holds checkpoints ...
    pass --resume auto", and with --resume auto it then said a finished run is not resumed. Now "finished" is
    checked first: the message names the run's model and never offers --resume auto alone; pretrain, whose finished
    runs can be trained further, offers --resume auto with a larger --max-steps."""
    run = _run_dir(tmp_path / "ft", "finetune", checkpoint=True, finished="eval_results.json", model="best")
    (run / "eval_results.json").rmdir()
    (run / "eval_results.json").write_text("{}")
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    with pytest.raises(LitebertError) as exc:
        _check(run, may_extend=False)
    assert str(exc.value) == (
        f"--output {run} holds a finished `litebert finetune` run (its model is in {run / 'best'}): choose a new "
        f"--output, or remove {run} to run it again (nothing was written)"
    )
    assert "--resume" not in str(exc.value)
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
    # without checkpoints (--no-checkpoints): the same message
    nc = _run_dir(tmp_path / "nc", "finetune", finished="eval_results.json", model="best")
    with pytest.raises(LitebertError, match=r"holds a finished `litebert finetune` run \(its model is in .*best\): ch"):
        _check(nc, may_extend=False)
    pre = _run_dir(tmp_path / "pre", "pretrain", checkpoint=True, finished="final", model="final")
    with pytest.raises(LitebertError) as exc:
        _check(pre, "pretrain")
    assert str(exc.value) == (
        f"--output {pre} holds a finished `litebert pretrain` run (its model is in {pre / 'final'}): pass --resume "
        f"auto with a larger --max-steps to train it further, or choose a new --output, or remove {pre} to run it "
        "again (nothing was written)"
    )
    pre_nc = _run_dir(tmp_path / "pre_nc", "pretrain", finished="final", model="final")  # nothing to continue from
    with pytest.raises(LitebertError, match=r"run \(its model is in .*final\): choose a new --output, or remove"):
        _check(pre_nc, "pretrain")


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


# ------------------------------------------------------------------------------------------- resumed settings
@dataclasses.dataclass
class _Cfg:
    data: str = "data"
    learning_rate: float = 1e-3
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_steps: int = 10
    logging_steps: int = 5
    precision: str = "auto"


def _recorded_run(path, cfg, *, world_size=1, step=4, precision="fp32"):
    """A run directory with the settings ``cfg`` recorded and a checkpoint of ``step`` written by ``world_size``."""
    gbs = cfg.batch_size * cfg.gradient_accumulation_steps * world_size
    settings = run_settings("pretrain", cfg, {"world_size": world_size, "global_batch_size": gbs})
    path.mkdir(parents=True)
    (path / "run_settings.json").write_text(json.dumps(settings))
    ckpt = path / "checkpoints" / f"step-{step}"
    ckpt.mkdir(parents=True)
    extra = {"global_batch_size": gbs, "precision": precision}
    (ckpt / "trainer_state.json").write_text(json.dumps({"step": step, "world_size": world_size, "extra": extra}))
    return ckpt


def _resume(ckpt, cfg, *, world_size=1, precision=("auto", "fp32"), **kw):
    gbs = cfg.batch_size * cfg.gradient_accumulation_steps * world_size
    record = {
        "world_size": world_size,
        "global_batch_size": gbs,
        "precision": {"requested": precision[0], "precision": precision[1]},
    }
    kw.setdefault("may_change", ("logging_steps",))
    check_resume_settings(ckpt, run_settings("pretrain", cfg, record), cfg, steps=cfg.max_steps, **kw)


def test_a_resume_that_changes_the_trajectory_is_refused(tmp_path, monkeypatch):
    """Defect: `--resume auto` took a changed learning rate or batch size without a word. Each change is named, old →
    new; what may change (logging ...) may, and a relative path names the same data as the absolute one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    ckpt = _recorded_run(tmp_path / "run", _Cfg())
    _resume(ckpt, _Cfg(data=str(tmp_path / "data"), logging_steps=1))  # same data, other logging: fine
    _resume(None, _Cfg(learning_rate=1.0))  # a fresh start: nothing to compare
    (tmp_path / "data" / "manifest.json").write_text("{}")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "manifest.json").write_text("{}")
    _resume(ckpt, _Cfg(data="copy"))  # a copy of the data (a copied run, e.g. an ablate study): the same data
    (tmp_path / "copy" / "manifest.json").write_text('{"settings": {}}')
    with pytest.raises(LitebertError, match="--data 'data' → 'copy'"):
        _resume(ckpt, _Cfg(data="copy"))
    with pytest.raises(LitebertError) as exc:
        _resume(ckpt, _Cfg(learning_rate=5e-2, batch_size=4, data="other"))
    msg = str(exc.value)
    assert "--learning-rate 0.001 → 0.05" in msg and "--batch-size 8 → 4" in msg and "--data 'data' → 'other'" in msg
    assert msg.startswith(f"--resume: {ckpt} was trained with other settings") and "new --output" in msg
    assert "\n" not in msg
    # --max-steps: never below the checkpoint's step; larger only where the command extends runs (pretrain)
    with pytest.raises(LitebertError, match="--max-steps 3 is below the checkpoint's step 4"):
        _resume(ckpt, _Cfg(max_steps=3), may_extend=True)
    _resume(ckpt, _Cfg(max_steps=20), may_extend=True)
    for steps in (8, 20):
        with pytest.raises(LitebertError, match=f"--max-steps 10 → {steps}"):
            _resume(ckpt, _Cfg(max_steps=steps))
    # an explicit precision other than the checkpoint's; auto keeps it (or falls back on another device)
    with pytest.raises(LitebertError, match="--precision 'fp32' → 'bf16'"):
        _resume(ckpt, _Cfg(precision="bf16"), precision=("bf16", "bf16"))
    _resume(ckpt, _Cfg(), precision=("auto", "fp32"))


def test_a_resume_on_another_number_of_processes_keeps_the_global_batch(tmp_path):
    """1 process x batch 8 → 2 processes x batch 4 (or 1 x 4 x 2 accumulation → 2 x 4): the same global batch, whose
    data position the loop carries over; another global batch is refused. With the same number of processes batch and
    accumulation stay as they were (the loop's data position counts micro-batches)."""
    ckpt = _recorded_run(tmp_path / "run", _Cfg())
    _resume(ckpt, _Cfg(batch_size=4), world_size=2)
    _resume(ckpt, _Cfg(batch_size=2, gradient_accumulation_steps=2), world_size=2)
    with pytest.raises(LitebertError, match=r"global batch \(processes × --batch-size × --gradient-accumulation"):
        _resume(ckpt, _Cfg(batch_size=8), world_size=2)
    with pytest.raises(LitebertError, match="--batch-size 8 → 4; --gradient-accumulation-steps 1 → 2"):
        _resume(ckpt, _Cfg(batch_size=4, gradient_accumulation_steps=2))


def test_the_settings_of_the_segment_that_wrote_the_checkpoint_count(tmp_path):
    """A run extended to 20 steps (run_settings.resume-step-10.json) and checkpointed at 15 resumes at 20; the
    record of a resume from the checkpoint itself (written after it) does not count."""
    ckpt = _recorded_run(tmp_path / "run", _Cfg(), step=15)
    extended = run_settings("pretrain", _Cfg(max_steps=20), {"world_size": 1, "global_batch_size": 8})
    (tmp_path / "run" / "run_settings.resume-step-10.json").write_text(json.dumps(extended))
    (tmp_path / "run" / "run_settings.resume-step-15.json").write_text(json.dumps({**extended, "pretrain_config": {}}))
    _resume(ckpt, _Cfg(max_steps=20))
    with pytest.raises(LitebertError, match="--max-steps 20 → 16"):
        _resume(ckpt, _Cfg(max_steps=16), may_extend=True)


def test_check_no_overwrite_names_a_file_given_as_output(tmp_path):
    """evaluate/predict --output FILE or FILE/sub: one line naming the file, not an OS error from mkdir."""
    from litebert.training.run import check_no_overwrite

    f = tmp_path / "x.txt"
    f.write_text("keep\n")
    for out in (f, f / "sub"):
        with pytest.raises(LitebertError, match=r"x\.txt is a file, not a directory"):
            check_no_overwrite(out, "predict", ["predictions.tsv"])
    assert f.read_text() == "keep\n"
    check_no_overwrite(tmp_path / "new" / "dir", "predict", ["predictions.tsv"])  # absent: fine


def test_the_first_settings_file_of_a_run_is_run_settings_json(tmp_path):
    """Defect: `pretrain --resume PATH` into a new --output wrote only run_settings.resume-step-N.json, so the
    directory was no run (`--config RUN/run_settings.json` failed, `litebert info` saw an empty model directory).
    The first settings file of a run is run_settings.json, resumed or not; a later segment adds its own file."""
    ckpt = tmp_path / "old" / "checkpoints" / "step-4"
    new, settings = tmp_path / "new", run_settings("pretrain", _Cfg())
    assert write_run_settings(new, settings, ckpt) == new / "run_settings.json"
    assert run_command(new) == "pretrain"
    later = write_run_settings(new, {**settings, "max_steps": 20}, new / "checkpoints" / "step-10")
    assert later == new / "run_settings.resume-step-10.json"
    assert json.loads((new / "run_settings.json").read_text()) == json.loads(json.dumps(settings))  # kept
    assert write_run_settings(tmp_path / "fresh", settings) == tmp_path / "fresh" / "run_settings.json"
    # a run that an older litebert resumed into a new directory (only a resume file): later segments add theirs
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "run_settings.resume-step-4.json").write_text(json.dumps(settings))
    assert write_run_settings(legacy, settings, legacy / "checkpoints" / "step-8").name == (
        "run_settings.resume-step-8.json"
    )


def test_state_mismatch_names_what_torch_refuses(tmp_path):
    """state_mismatch lists the keys torch's strict load_state_dict reports (the oracle: its missing/unexpected
    lists and its size-mismatch error), a few of each, on one line; None for a state dict that loads."""
    torch.manual_seed(0)
    config = AlbertConfig.from_preset("albert-debug", vocab_size=100)
    pretraining, classifier = AlbertForPreTraining(config), AlbertForSequenceClassification(config)
    state = classifier.state_dict()
    oracle = pretraining.load_state_dict(state, strict=False)
    msg = state_mismatch(pretraining.state_dict(), state, limit=2)
    assert msg == (
        f"missing {', '.join(oracle.missing_keys[:2])} (+{len(oracle.missing_keys) - 2} more); "
        f"unexpected {', '.join(oracle.unexpected_keys)}"
    )
    assert state_mismatch(pretraining.state_dict(), AlbertForPreTraining(config).state_dict()) is None
    bigger = AlbertForPreTraining(config.replace(vocab_size=120)).state_dict()
    with pytest.raises(RuntimeError) as exc:
        pretraining.load_state_dict(bigger)
    resized = [line.split("size mismatch for ")[1].split(":")[0] for line in str(exc.value).splitlines()[1:]]
    msg = state_mismatch(pretraining.state_dict(), bigger, limit=10)
    prefix = "other shapes (here / in the checkpoint): "
    assert msg.startswith(prefix) and "\n" not in msg
    entries = [entry.split() for entry in msg.removeprefix(prefix).split(", ")]
    assert [e[0] for e in entries] == resized  # every key torch names, and only those
    assert entries[0] == ["albert.embeddings.word_embeddings.weight", "100x32", "/", "120x32"]


def _checkpoint(run_dir, model, *, command, extra=None):
    """A complete checkpoint of ``model`` at step 8 in ``run_dir`` (``command``'s run when given)."""
    from litebert.training.state import save_checkpoint

    run_dir.mkdir(parents=True)
    if command is not None:
        (run_dir / "run_settings.json").write_text(json.dumps({"command": command, f"{command}_config": {}}))
    return save_checkpoint(
        run_dir,
        8,
        rank=0,
        world_size=1,
        model_state=model.state_dict(),
        optimizer_state={},
        scheduler_state={},
        trainer_state={"extra": extra or {}},
    )


def test_a_checkpoint_of_another_command_or_model_is_refused(tmp_path):
    """Defect: `pretrain --resume` from a finetune run's checkpoint failed only when loading it, after writing into
    --output, with torch's message cut after "Error(s) in loading state_dict for AlbertForPreTraining:". Now one
    line says what the checkpoint is (its run's command, else its trainer state; its heads) and what was
    expected; a checkpoint of the same model passes."""
    torch.manual_seed(0)
    config = AlbertConfig.from_preset("albert-debug", vocab_size=100)
    model = AlbertForPreTraining(config)
    check_checkpoint_fits(None, "pretrain", model)
    check_checkpoint_fits(_checkpoint(tmp_path / "p", model, command="pretrain"), "pretrain", model)
    classifier = AlbertForSequenceClassification(config)
    for name, command, extra in (("f", "finetune", None), ("copied", None, {"finetune": {"task": "sst2"}})):
        ckpt = _checkpoint(tmp_path / name, classifier, command=command, extra=extra)
        with pytest.raises(LitebertError) as exc:
            check_checkpoint_fits(ckpt, "pretrain", model)
        assert str(exc.value) == (
            f"--resume {ckpt}: a `litebert finetune` checkpoint (AlbertForSequenceClassification), not a `litebert "
            "pretrain` one (AlbertForPreTraining): resume from a checkpoint of a `litebert pretrain` run, or start "
            "without --resume (nothing was written)"
        )
    # a pretrain checkpoint of MLM-only data (no pooler, no SOP head) and one of another size
    mlm = _checkpoint(tmp_path / "mlm", AlbertForMaskedLM(config), command="pretrain")
    with pytest.raises(
        LitebertError,
        match=r"its model \(AlbertForMaskedLM\) does not fit this run's "
        r"AlbertForPreTraining: missing albert\.pooler\.weight, albert\.pooler\.bias, sop_classifier",
    ):
        check_checkpoint_fits(mlm, "pretrain", model)
    small = _checkpoint(tmp_path / "small", AlbertForPreTraining(config.replace(vocab_size=90)), command="pretrain")
    with pytest.raises(
        LitebertError,
        match=r"its model does not fit this run's AlbertForPreTraining: other shapes "
        r"\(here / in the checkpoint\): albert\.embeddings\.word_embeddings\.weight 100x32 / 90x32, ",
    ):
        check_checkpoint_fits(small, "pretrain", model)
    # a fresh run into the same --output is refused (it holds the run): the hint names what works
    with pytest.raises(LitebertError) as exc:
        check_checkpoint_fits(small, "pretrain", model)
    assert str(exc.value).endswith("or start a fresh run without --resume into a new --output (nothing was written)")


def test_a_second_resume_from_the_same_checkpoint_keeps_the_first_ones_settings(tmp_path):
    """Defect: a second resume from step 3 overwrote run_settings.resume-step-3.json, the first resume's record.
    Now the second writes run_settings.resume-step-3-2.json (then -3 ...), and the settings of the segment that
    wrote a later checkpoint are the newest of them."""
    from litebert.training.run import _recorded_settings

    run, settings = tmp_path / "run", run_settings("pretrain", _Cfg())
    write_run_settings(run, settings)
    ckpt = run / "checkpoints" / "step-3"
    first = write_run_settings(run, {**settings, "max_steps": 10}, ckpt)
    second = write_run_settings(run, {**settings, "max_steps": 20}, ckpt)
    third = write_run_settings(run, {**settings, "max_steps": 30}, ckpt)
    assert (first.name, second.name, third.name) == (
        "run_settings.resume-step-3.json",
        "run_settings.resume-step-3-2.json",
        "run_settings.resume-step-3-3.json",
    )
    assert [json.loads(f.read_text())["max_steps"] for f in (first, second, third)] == [10, 20, 30]
    assert _recorded_settings(run, "pretrain", 5)["max_steps"] == 30
    assert "max_steps" not in _recorded_settings(run, "pretrain", 3)  # run_settings.json: the first segment


def test_resume_from_a_run_directory_names_its_checkpoints(tmp_path):
    """Defect: `--resume RUN` (the run directory, not a checkpoint) said "checkpoint RUN is incomplete (no COMPLETE
    marker)". Now it says RUN is a run directory and names --resume auto and its newest checkpoint."""
    run = _run_dir(tmp_path / "run", "pretrain", checkpoint=True)
    with pytest.raises(LitebertError) as exc:
        resolve_resume(run, run, verify=True)
    newest = run / "checkpoints" / "step-4"
    assert str(exc.value) == (
        f"--resume {run} is a run directory: use --resume auto (its newest checkpoint is {newest}) or --resume {newest}"
    )
    empty = _run_dir(tmp_path / "empty", "pretrain")
    with pytest.raises(LitebertError, match="is a run directory: use --resume auto \\(it holds no complete"):
        resolve_resume(empty, empty, verify=True)


def test_more_processes_than_gpus_is_one_error_before_anything_is_written(tmp_path, monkeypatch):
    from litebert.training import distributed as D
    from litebert.training.pretrain import PretrainConfig, pretrain

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda *a: pytest.fail("set_device reached"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(LitebertError, match=r"^2 processes on this node but 1 GPU\(s\).*--nproc-per-node 1"):
        D.init_distributed()
    out = tmp_path / "run"
    cfg = PretrainConfig(data=str(tmp_path / "data"), output=str(out), model_config="albert-debug", device="cuda")
    with pytest.raises(LitebertError, match="2 processes on this node but 1 GPU"):
        pretrain(cfg)
    assert not out.exists()
    # finetune alike, before it reads anything (none of these files exists)
    from litebert.finetune import DataOptions, FinetuneConfig, finetune

    ft_out = tmp_path / "finetune"
    ft = FinetuneConfig(
        model=str(tmp_path / "model"), train_file=str(tmp_path / "train.tsv"), dev_file=str(tmp_path / "dev.tsv"),
        output_dir=str(ft_out), data=DataOptions(task="sst2"), device="cuda",
    )  # fmt: skip
    with pytest.raises(LitebertError, match="2 processes on this node but 1 GPU"):
        finetune(ft)
    assert not ft_out.exists()
    # rank 0 of the two (LOCAL_RANK 0) is refused alike: every process says the same
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(LitebertError, match="2 processes on this node but 1 GPU"):
        D.init_distributed("cuda")


def _verdicts(run, cfg, out: Path) -> tuple[tuple[str, str], tuple[str, str], tuple[str, str], tuple[str, str]]:
    """``run(cfg)`` on 2 gloo processes twice (:func:`_distributed_helpers.verdict_worker`), rank 1 two seconds
    late: (the first run's results, how often each rank decided on --output itself, the same for the second)."""
    import tempfile

    import _distributed_helpers as H
    import torch.multiprocessing as mp

    store = tempfile.mktemp(prefix="litebert_store_")
    mp.spawn(H.verdict_worker, args=(2, store, str(out), run, cfg), nprocs=2)
    return tuple(zip(*((out.parent / f"{out.name}.rank{r}.txt").read_text().split("\n") for r in range(2))))


@pytest.mark.usefixtures("one_thread")
def test_the_output_verdict_is_rank_0s_so_no_rank_sees_another_ranks_writes(tiny, tmp_path):
    # issue 25: under torchrun --fsdp, rank 1 checked --output after rank 0 had written run_settings.json into it
    # and refused the run as "an interrupted run"; now rank 0 decides and every rank gets its verdict
    from litebert.training.pretrain import PretrainConfig, pretrain

    out = tmp_path / "run"
    cfg = PretrainConfig(
        data=str(tiny.pretraining_data()), output=str(out), model_config="albert-debug", max_steps=1, batch_size=2,
        progress_bar=False, device="cpu",
    )  # fmt: skip
    first, decided, again, decided_again = _verdicts(pretrain, cfg, out)
    assert first == ("ok", "ok") and decided == ("decided 1", "decided 0")
    assert (out / "final" / "model.safetensors").is_file()
    assert again[0] == again[1] and again[0].startswith("LitebertError: ")
    assert f"holds a finished `litebert pretrain` run (its model is in {out / 'final'})" in again[0]
    assert decided_again == ("decided 2", "decided 0")


@pytest.mark.usefixtures("one_thread")
def test_finetune_takes_rank_0s_output_verdict_after_joining_the_group(shared_data, tmp_path):
    # the same for finetune, which checked --output (and so every rank by itself) before it joined the group
    from _training_helpers import finetune_model_dir

    from litebert.finetune import DataOptions, FinetuneConfig, finetune

    sst2 = shared_data / "glue/SST-2"
    out = tmp_path / "run"
    cfg = FinetuneConfig(
        model=str(finetune_model_dir(shared_data, tmp_path / "model")), train_file=str(sst2 / "train.tsv"),
        dev_file=str(sst2 / "dev.tsv"), output_dir=str(out), data=DataOptions(task="sst2"), max_train_examples=16,
        max_eval_examples=8, batch_size=4, max_steps=2, max_seq_length=32, device="cpu", progress_bar=False,
    )  # fmt: skip
    first, decided, again, decided_again = _verdicts(finetune, cfg, out)
    assert first == ("ok", "ok") and decided == ("decided 1", "decided 0")
    assert (out / "eval_results.json").is_file() and (out / "best" / "model.safetensors").is_file()
    assert again[0] == again[1] and again[0].startswith("LitebertError: ")
    assert f"holds a finished `litebert finetune` run (its model is in {out / 'best'})" in again[0]
    assert decided_again == ("decided 2", "decided 0")
