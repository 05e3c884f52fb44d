"""Split a SQuAD-layout JSON file (SQuAD, CMRC 2018, DRCD) by article into a train part and an evaluation part.

    python scripts/split_squad.py ../shared/data/squad/v1.1/dev-v1.1.json --eval-articles 8 --out runs/squad-split

writes ``OUT/train.json`` (the first ``N - eval_articles`` articles) and ``OUT/eval.json`` (the last
``eval_articles``), so that no paragraph of the evaluation part was seen in training. The shared data has no SQuAD
train split (``train-v1.1.json`` was not obtained) and only the CMRC 2018 *trial* set, hence the split.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from litebert.fileio import atomic_write_json


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", help="SQuAD-layout JSON (data[].paragraphs[].qas[])")
    p.add_argument("--eval-articles", type=int, required=True, metavar="N", help="articles held out, from the end")
    p.add_argument("--out", required=True, metavar="DIR")
    args = p.parse_args(argv)
    doc = json.loads(Path(args.file).read_text(encoding="utf-8"))
    data = doc["data"]
    if not 0 < args.eval_articles < len(data):
        p.error(f"--eval-articles must be between 1 and {len(data) - 1} (the file has {len(data)} articles)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cut = len(data) - args.eval_articles
    for name, part in (("train", data[:cut]), ("eval", data[cut:])):
        atomic_write_json(out / f"{name}.json", {**doc, "data": part}, sort_keys=False)
        questions = sum(len(par["qas"]) for art in part for par in art["paragraphs"])
        print(f"{out / (name + '.json')}: {len(part)} articles, {questions} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
