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


def short_finetune(
    model_dir: Path, out: Path, task: str, steps: int, seed: int, data: str | None = None, max_seq_length: int = 64
) -> dict:
    """Fine-tune ``model_dir`` for ``steps`` steps on ``task`` (batch 32, lr 5e-5, AdamW) and score the dev set.

    Returns ``{"finetune_task": task, "finetune_<metric>": value, ...}`` for every dev metric of the best checkpoint.
    A finished run (``out/eval_results.json``) is read, not rerun.
    """
    import json

    from litebert.finetune.run import DataOptions, FinetuneConfig, finetune

    train, dev = task_files(task, data)
    results = out / "eval_results.json"
    if not results.is_file():
        finetune(
            FinetuneConfig(
                model=str(model_dir),
                train_file=str(train),
                dev_file=str(dev),
                output_dir=str(out),
                data=DataOptions(task=task),
                max_steps=steps,
                batch_size=32,
                learning_rate=5e-5,
                max_seq_length=max_seq_length,
                seed=seed,
                eval_steps=max(1, steps // 3),
                max_train_examples=32 * steps,  # one pass at most: no need to tokenize the rest
                progress_bar=False,
                keep_checkpoints=False,
                resume="auto",  # an interrupted run continues (finetune refuses a fresh run into its directory)
                device="cpu",
            )
        )
    metrics = json.loads(results.read_text(encoding="utf-8"))
    return {
        "finetune_task": task,
        **{f"finetune_{k}": v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
    }
