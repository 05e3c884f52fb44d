"""``litebert plot OUTPUT``: loss and accuracy curves of a run (``OUTPUT/metrics.jsonl``) drawn to a PNG."""

from __future__ import annotations

from pathlib import Path

from litebert.errors import LitebertError
from litebert.fileio import atomic_write
from litebert.training.metrics import read_metrics

# not curves of the two panels: the step, rates, counts and perplexity (a loss's exponential, on another scale)
_SKIP = {
    "step",
    "split",
    "learning_rate",
    "grad_norm",
    "tokens_per_second",
    "steps_per_second",
    "mlm_perplexity",
    "skipped_steps",
}


def panel_keys(records: list[dict]) -> tuple[list[str], list[str]]:
    """The metrics ``plot_metrics`` draws, split by panel: (keys ending in ``loss``, the other numeric keys:
    accuracies, F1, correlations …), each sorted; the names in ``_SKIP`` are not drawn."""
    keys = sorted({k for r in records for k, v in r.items() if k not in _SKIP and isinstance(v, (int, float))})
    return [k for k in keys if k.endswith("loss")], [k for k in keys if not k.endswith("loss")]


def plot_metrics(output_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw losses (left) and accuracies (right), train as lines and eval as markers; returns the PNG path.

    Keys ending in ``loss`` go left, everything else numeric (accuracy, F1, …) right. Raises
    :class:`LitebertError` when ``output_dir`` has no ``metrics.jsonl`` records.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    output_dir = Path(output_dir)
    records = read_metrics(output_dir)
    if not records:
        raise LitebertError(f"{output_dir} has no metrics.jsonl records to plot (is it a litebert run directory?)")
    out = Path(out) if out else output_dir / "curves.png"
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(12, 4.5))
    # one colour per metric, so train (line) and eval (markers) of the same metric read as a pair
    loss_keys, other_keys = panel_keys(records)
    all_keys = sorted(loss_keys + other_keys)
    colour = {key: f"C{i % 10}" for i, key in enumerate(all_keys)}
    for split, style in (("train", "-"), ("eval", "o--")):
        rows = [r for r in records if r.get("split") == split]
        for key in all_keys:
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax = ax_loss if key.endswith("loss") else ax_acc
            ax.plot(xs, ys, style, color=colour[key], label=f"{split} {key}", markersize=4)
    for ax, title in ((ax_loss, "loss (nats)"), (ax_acc, "accuracy")):
        ax.set_xlabel("step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(str(output_dir))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=100, format=out.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return out
