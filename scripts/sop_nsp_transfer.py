#!/usr/bin/env python
"""Does an SOP-trained model's NSP accuracy grow with its SOP accuracy? (docs/ablations.md, "scale or bug?").

Reads one or more ``litebert ablate`` ``results.jsonl`` files, keeps every cell trained with SOP that learned it
(SOP accuracy ≥ ``--min-sop``; not the ``none``/``nsp``/``sop-official`` cells, not the ``system`` study), counts a
model copied into several studies once (same SOP, NSP and MLM scores), and prints the range of SOP and NSP accuracy,
their correlation, the least-squares slope of NSP on SOP with a bootstrap 95 % interval, and the range of the
NSP discrimination (other-document pairs called abnormal minus same-document pairs called abnormal).

    python scripts/sop_nsp_transfer.py runs/s6/ablate/results.jsonl runs/s7/ablate/results.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

NOT_SOP = {"none", "nsp", "sop-official"}


def sop_models(paths: list[Path], min_sop: float) -> list[dict]:
    models: dict[tuple, dict] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r["study"] == "system" or r["cell"] in NOT_SOP or r["sop_accuracy"] < min_sop:
                continue
            key = (round(r["sop_accuracy"], 6), round(r["nsp_accuracy"], 6), round(r["mlm_loss"], 6))
            models.setdefault(key, r)
    return list(models.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="results.jsonl files of litebert ablate")
    p.add_argument("--min-sop", type=float, default=0.52, help="leave out cells that did not learn SOP")
    p.add_argument("--bootstrap", type=int, default=5000)
    args = p.parse_args()
    for path in args.results:
        if not path.is_file():
            raise SystemExit(f"error: {path}: no such file (give the results.jsonl of a `litebert ablate` output)")
    models = sop_models(args.results, args.min_sop)
    if len({m["sop_accuracy"] for m in models}) < 2:
        raise SystemExit(
            f"error: {len(models)} SOP-trained model(s) with SOP accuracy >= {args.min_sop} in "
            f"{', '.join(map(str, args.results))}: a slope needs at least two of different SOP accuracy"
        )
    sop = np.array([m["sop_accuracy"] for m in models]) * 100
    nsp = np.array([m["nsp_accuracy"] for m in models]) * 100
    # NSP label 0 = same document, in order; label 1 = B from another document. Called abnormal = predicted 1.
    disc = np.array([m["nsp_accuracy_label1"] - (1 - m["nsp_accuracy_label0"]) for m in models]) * 100
    slope = np.polyfit(sop, nsp, 1)[0]
    rng = np.random.default_rng(0)
    slopes = []
    for _ in range(args.bootstrap):
        i = rng.integers(0, len(sop), len(sop))
        if np.ptp(sop[i]) > 0:
            slopes.append(np.polyfit(sop[i], nsp[i], 1)[0])
    lo, hi = np.percentile(slopes, [2.5, 97.5]) if slopes else (float("nan"), float("nan"))
    print(f"{len(models)} distinct SOP-trained models")
    print(f"SOP accuracy {sop.min():.1f}-{sop.max():.1f} %, NSP accuracy {nsp.min():.1f}-{nsp.max():.1f} %")
    print(f"correlation {np.corrcoef(sop, nsp)[0, 1]:+.2f}; slope of NSP on SOP {slope:+.2f} [{lo:+.2f}, {hi:+.2f}]")
    print(
        f"NSP discrimination (other-doc called abnormal - same-doc called abnormal) {disc.min():+.1f} to {disc.max():+.1f}"
    )


if __name__ == "__main__":
    main()
