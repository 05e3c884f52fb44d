"""A short fine-tuning run of an ablation cell's model (``litebert ablate --finetune-task NAME``)."""

from __future__ import annotations

from pathlib import Path

from litebert.errors import LitebertError

#: task preset -> its directory under the shared data directory (``litebert.paths.data_dir()``)
TASK_DIRS = {"sst2": "glue/SST-2", "mrpc": "glue/MRPC", "chnsenticorp": "chnsenticorp"}


def task_files(task: str, data: str | None = None) -> tuple[Path, Path]:
    """(train.tsv, dev.tsv) of ``task`` in ``data`` (default: the shared data directory's copy of the task).

    Raises LitebertError when the task has no known directory and ``data`` is not given, or a file is missing.
    """
    from litebert.paths import data_dir

    if data is None:
        if task not in TASK_DIRS:
            raise LitebertError(
                f"--finetune-task {task!r}: no known data directory (known: {', '.join(TASK_DIRS)}); "
                "give --finetune-data DIR with train.tsv and dev.tsv"
            )
        d = data_dir() / TASK_DIRS[task]
    else:
        d = Path(data)
    train, dev = d / "train.tsv", d / "dev.tsv"
    for f in (train, dev):
        if not f.is_file():
            raise LitebertError(f"--finetune-task {task}: {f} not found")
    return train, dev


#: the short fine-tuning's fixed optimizer settings (AdamW)
BATCH_SIZE = 32
LEARNING_RATE = 5e-5


def finetune_settings(task: str, steps: int, seed: int, data: str | None = None, max_seq_length: int = 64) -> dict:
    """What decides a short fine-tuning's result: the task, its train/dev files, steps, seed, length, batch size and
    learning rate; recorded as ``finetune_settings`` beside the ``finetune_<metric>`` fields of a cell's record, so
    that a command with other settings fine-tunes again instead of reusing them. Raises as :func:`task_files`."""
    train, dev = task_files(task, data)
    return {
        "task": task,
        "train": str(train),
        "dev": str(dev),
        "steps": steps,
        "seed": seed,
        "max_seq_length": max_seq_length,
        "batch_size": BATCH_SIZE,
        "learning_rate": LEARNING_RATE,
    }


def _recorded_config(out: Path) -> dict | None:
    """The ``finetune_config`` of the fine-tuning run in ``out`` (its ``run_settings.json``), None when unreadable."""
    from litebert.fileio import read_json

    try:
        return read_json(out / "run_settings.json", what="run settings", expect=dict).get("finetune_config")
    except LitebertError:
        return None


def short_finetune(
    model_dir: Path,
    out: Path,
    task: str,
    steps: int,
    seed: int,
    data: str | None = None,
    max_seq_length: int = 64,
    log=print,
) -> dict:
    """Fine-tune ``model_dir`` for ``steps`` steps on ``task`` (batch 32, lr 5e-5, AdamW) and score the dev set.

    Returns ``{"finetune_task": task, "finetune_settings": finetune_settings(...), "finetune_<metric>": value, ...}``
    for every dev metric of the best checkpoint. A run in ``out`` of the same settings (its ``run_settings.json``) is
    reused: read when finished (``out/eval_results.json``), resumed when interrupted; a run of other settings (or of
    settings it did not record) is removed and fine-tuned again, since its metrics would be reported as this one's.
    """
    import json
    import shutil

    from litebert.finetune.run import DataOptions, FinetuneConfig, finetune
    from litebert.settings import to_dict

    settings = finetune_settings(task, steps, seed, data, max_seq_length)
    cfg = FinetuneConfig(
        model=str(model_dir),
        train_file=settings["train"],
        dev_file=settings["dev"],
        output_dir=str(out),
        data=DataOptions(task=task),
        max_steps=steps,
        batch_size=BATCH_SIZE,
        learning_rate=LEARNING_RATE,
        max_seq_length=max_seq_length,
        seed=seed,
        eval_steps=max(1, steps // 3),
        max_train_examples=BATCH_SIZE * steps,  # one pass at most: no need to tokenize the rest
        progress_bar=False,
        keep_checkpoints=False,
        resume="auto",  # an interrupted run continues (finetune refuses a fresh run into its directory)
        device="cpu",
    )
    results = out / "eval_results.json"
    recorded, wanted = _recorded_config(out), json.loads(json.dumps(to_dict(cfg)))
    if recorded != wanted and (recorded is not None or results.is_file()):
        changed = sorted(k for k in wanted if recorded is None or recorded.get(k) != wanted[k])
        log(f"ablate: {out} holds a fine-tuning run of other settings ({', '.join(changed)}); fine-tuning again")
        shutil.rmtree(out)
    if not results.is_file():
        finetune(cfg)
    metrics = json.loads(results.read_text(encoding="utf-8"))
    return {
        "finetune_task": task,
        "finetune_settings": settings,
        **{f"finetune_{k}": v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
    }
