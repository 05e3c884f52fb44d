"""``DIR/<study>.md`` (our table beside the paper's numbers) and ``DIR/<study>.png`` (a bar plot) of a study."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from litebert.ablate.grid import PAPER
from litebert.fileio import atomic_write, atomic_write_text

TITLES = {
    "embedding-size": ("Embedding size E under all-shared / not-shared layers", "Table 3 (ALBERT-base)"),
    "sharing": ("Cross-layer sharing strategies", "Table 4 (ALBERT-base, E = 128)"),
    "inter-sentence": (
        "Inter-sentence loss: none, NSP, SOP; every model scored on both tasks",
        "Table 5 (ALBERT-base)",
    ),
    "depth": ("Depth at a constant parameter count (all-shared)", "Table 11 (ALBERT-large)"),
    "width": ("Hidden size of a 3-layer all-shared model", "Table 12 (3-layer ALBERT-large)"),
    "dropout": ("Dropout 0.1 against 0", "Table 8 (ALBERT-xxlarge, about 1M steps)"),
    "data": ("Corpus fraction at an equal budget", "Table 7 (ALBERT-base, direction only)"),
    "system": ("litebert pretrain against transformers.Trainer, equal budget", "no paper counterpart"),
}


def wilson_interval(correct: float, n: float, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion ``correct / n`` (Wilson 1927); (nan, nan) when n = 0.

    The bounds lie in [0, 1]: at 0 successes the lower bound is exactly 0 and at n the upper bound exactly 1 (the
    closed form), which ``centre ∓ half`` misses by a rounding error (-2e-19 was printed as "-0.0"); the others are
    clamped to [0, 1] for the same reason.
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if correct <= 0 else max(0.0, centre - half)
    high = 1.0 if correct >= n else min(1.0, centre + half)
    return low, high


def _mean(values: list[float]) -> tuple[float, float | None]:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return float("nan"), None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else None)


def _pct(values: list[float], ci: list | None = None) -> str:
    m, sd = _mean(values)
    if math.isnan(m):
        return "–"
    s = f"{100 * m:.1f}"
    if sd is not None:
        s += f" ± {100 * sd:.1f}"
    elif ci:  # clamped too: a record written before wilson_interval clamped holds -2e-19 for 0 % ("-0.0")
        s += f" [{100 * max(0.0, ci[0]):.1f}, {100 * min(1.0, ci[1]):.1f}]"
    return s


def _mlm_ci95(record: dict) -> list | None:
    """The MLM accuracy's 95 % Wilson interval over its scored tokens (``mlm_ci95``; computed from
    ``mlm_accuracy`` × ``mlm_tokens`` for records written before the field existed)."""
    if record.get("mlm_ci95"):
        return record["mlm_ci95"]
    if record.get("mlm_tokens"):
        n = record["mlm_tokens"]
        return list(wilson_interval(record["mlm_accuracy"] * n, n))
    return None


def _group(records: list[dict]) -> dict[str, list[dict]]:
    cells: dict[str, list[dict]] = {}
    for r in records:
        cells.setdefault(r["cell"], []).append(r)
    return cells


def _schedule(record: dict) -> int:
    """The optimizer steps the record's cell was scheduled for (records before ``max_steps``: the steps run)."""
    return record.get("max_steps", record["steps"])


def _stopped_early(record: dict) -> bool:
    """Whether the cell stopped before its schedule ended (its time limit, ``--budget-minutes``, came first)."""
    return record["steps"] != _schedule(record)


def _budget(records: list[dict]) -> str:
    """The budget sentence of the table's header, from every record: the schedules, the time limits, and how the
    steps column reads (the steps run, "run / schedule" for a cell stopped before its schedule ended)."""
    schedules = sorted({_schedule(r) for r in records})
    budget = (
        f"a schedule of {schedules[0]} steps"
        if len(schedules) == 1
        else f"schedules of {', '.join(map(str, schedules))} steps"
    )
    limits = sorted({r["budget_minutes"] for r in records if r.get("budget_minutes")})
    if limits:
        budget += f", stopped at {' or '.join(f'{m:g}' for m in limits)} wall-clock minutes"
    if any(_stopped_early(r) for r in records):
        budget += " (the steps column: steps run / schedule, where a cell stopped before its schedule ended)"
    elif len(schedules) > 1:
        budget += " (per cell: the steps column)"
    return budget


def _steps(rs: list[dict]) -> str:
    """A cell's steps column: the steps run (mean over seeds), with " / schedule" when a seed stopped early."""
    run = str(round(_mean([r["steps"] for r in rs])[0]))
    if not any(_stopped_early(r) for r in rs):
        return run
    return f"{run} / {round(_mean([_schedule(r) for r in rs])[0])}"


def _evaluation(cells: dict[str, list[dict]]) -> str:
    """The held-out evaluation sentence of the table's header, from every record: one set when every cell was scored
    on the same number of sequences and masked tokens, else each size with the cells scored on it (such rows are
    not comparable)."""
    sizes: dict[tuple, list[str]] = {}
    for name, rs in cells.items():
        for r in rs:
            size = (r.get("sop_sequences"), r.get("nsp_sequences"), r.get("mlm_tokens"))
            if name not in sizes.setdefault(size, []):
                sizes[size].append(name)
    if len(sizes) == 1:
        sop, nsp, tokens = next(iter(sizes))
        return f"held-out sequences: SOP {sop}, NSP {nsp}; masked tokens scored: {tokens}"
    parts = [
        f"SOP {sop}, NSP {nsp}, {tokens} masked tokens ({', '.join(names)})"
        for (sop, nsp, tokens), names in sizes.items()
    ]
    return f"held-out evaluation differs between cells, so their rows are not comparable: {'; '.join(parts)}"


def table_markdown(study: str, records: list[dict], paper_keys: dict[str, str | None] | None = None) -> str:
    """The study's table: one row per cell (seeds averaged, ± their standard deviation; a single seed shows the 95 %
    Wilson interval of the accuracy), with the paper's row for the same cell beside it: ``paper_keys`` (cell name →
    :data:`PAPER` row, :attr:`litebert.ablate.grid.Cell.paper_key`), else the row of the same name."""
    title, source = TITLES[study]
    paper = PAPER.get(study, {})
    paper_keys = paper_keys if paper_keys is not None else {name: name for name in paper}
    cells = _group(records)
    not_metrics = {
        "finetune_task",
        "finetune_settings",
        "finetune_best_step",
        "finetune_num_examples",
        "finetune_truncated",
        "finetune_eval_loss",
    }
    ft = sorted({k for r in records for k in r if k.startswith("finetune_") and k not in not_metrics})
    lines = [f"# {study}: {title}", ""]
    if records:
        lines += [
            (
                f"Budget per cell: {_budget(records)}; seeds per cell: {max(len(v) for v in cells.values())}; "
                f"{_evaluation(cells)}. Accuracies in %; [95 % Wilson interval] for one seed, ± sd over seeds."
            ),
            "",
        ]
    head = ["cell", "parameters", "steps", "seconds", "tokens", "MLM loss", "MLM acc", "SOP acc", "NSP acc"]
    head += [f.replace("finetune_", "FT ") for f in ft]
    if study == "inter-sentence":
        head += ["SOP acc in-order / swapped", "NSP acc same-doc / other-doc"]
        head += ["paper MLM", "paper NSP", "paper SOP", "paper avg"]
    elif study != "system":
        head += ["paper row", "paper params", "paper avg"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, rs in cells.items():
        one = len(rs) == 1
        row = [
            name,
            f"{rs[0]['parameters']:,}",
            _steps(rs),
            f"{round(_mean([r['seconds'] for r in rs])[0])}",
            f"{_mean([r.get('tokens') for r in rs])[0] / 1e6:.2f} M",
            f"{_mean([r['mlm_loss'] for r in rs])[0]:.3f}",
            _pct([r["mlm_accuracy"] for r in rs], _mlm_ci95(rs[0]) if one else None),
            _pct([r["sop_accuracy"] for r in rs], rs[0].get("sop_ci95") if one else None),
            _pct([r["nsp_accuracy"] for r in rs], rs[0].get("nsp_ci95") if one else None),
        ]
        row += [_pct([r.get(f) for r in rs]) for f in ft]  # fine-tuning metrics are fractions too: in %
        key = paper_keys.get(name)
        p = paper.get(key, {}) if key else {}
        if study == "inter-sentence":
            for t in ("sop", "nsp"):
                a0 = _mean([r.get(f"{t}_accuracy_label0") for r in rs])[0]
                a1 = _mean([r.get(f"{t}_accuracy_label1") for r in rs])[0]
                row.append(f"{100 * a0:.1f} / {100 * a1:.1f}")
            row += [str(p.get(k, "–")) for k in ("mlm", "nsp", "sop", "avg")]
        elif study != "system":
            row += [key or "–", f"{p['params_m']}M" if "params_m" in p else "–", str(p.get("avg", "–"))]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        (
            f'Paper: arXiv:1909.11942v6, {source}. The paper\'s "avg" is its downstream average (SQuAD '
            "1.1/2.0, MNLI, SST-2, RACE) after 125k steps at batch 4096; ours are held-out pretraining metrics "
            "of a tiny model on a tiny budget: compare directions, not values."
        ),
    ]
    if study == "system":
        lines += [
            "",
            (
                "The transformers arm trains MLM only (DataCollatorForLanguageModeling has no sentence task), "
                "so its SOP/NSP columns are an untrained head (chance)."
            ),
        ]
    return "\n".join(lines) + "\n"


def write_report(
    root: Path, study: str, records: list[dict], paper_keys: dict[str, str | None] | None = None
) -> tuple[Path, Path | None]:
    """Write ``root/<study>.md`` and ``root/<study>.png`` (None when matplotlib is missing); returns both paths.
    ``paper_keys``: as :func:`table_markdown`."""
    md = atomic_write_text(root / f"{study}.md", table_markdown(study, records, paper_keys))
    try:
        import matplotlib
    except ImportError:
        return md, None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = _group(records)
    names = list(cells)
    metrics = [("mlm_accuracy", "MLM"), ("sop_accuracy", "SOP"), ("nsp_accuracy", "NSP")]
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names) + 2), 4.5))
    width = 0.8 / len(metrics)
    for j, (key, label) in enumerate(metrics):
        means = [100 * _mean([r[key] for r in cells[n]])[0] for n in names]
        errs = []
        for n in names:
            rs = cells[n]
            sd = _mean([r[key] for r in rs])[1]
            if sd is not None:
                errs.append(100 * sd)
            elif rs[0].get(key.replace("accuracy", "ci95")):
                lo, hi = rs[0][key.replace("accuracy", "ci95")]
                errs.append(100 * (hi - lo) / 2)
            else:
                errs.append(0.0)
        xs = [i + (j - 1) * width for i in range(len(names))]
        ax.bar(xs, means, width, yerr=errs, label=label, capsize=2)
    ax.axhline(50, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20)
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_title(f"{study}: {TITLES[study][0]}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png = atomic_write(root / f"{study}.png", lambda tmp: fig.savefig(tmp, dpi=100, format="png"))
    plt.close(fig)
    return md, png
