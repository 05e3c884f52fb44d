"""``litebert ablate`` (issue 15): the grid and its parameter counts, the evaluation, results.jsonl, resume, errors."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from litebert.ablate import RESULT_FIELDS, STUDIES, AblateConfig, ablate, build_grid, evaluate_model, select_cells
from litebert.ablate.grid import DEFAULT_BASE
from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.modeling import AlbertForPreTraining

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = {
    "vocab_size": 300,
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 4,
    "num_hidden_groups": 1,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "classifier_dropout_prob": 0.0,
}


def expected_parameters(c: AlbertConfig) -> int:
    """Closed form, written from the paper (§3.1) and HF's module list, independently of litebert.ablate."""
    V, E, H, FF, L = c.vocab_size, c.embedding_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers
    emb = V * E + c.max_position_embeddings * E + c.type_vocab_size * E + 2 * E  # tables + LayerNorm(E)
    emb += E * H + H  # the factorization: E -> H mapping
    attn = 4 * H * H + 4 * H + 2 * H  # q, k, v, dense + LayerNorm(H)
    ffn = 2 * H * FF + FF + H + 2 * H  # ffn, ffn_output + LayerNorm(H)
    n_attn = {"all": 1, "none": L, "attention": 1, "ffn": L}[c.sharing]  # one group (G = 1) unless not shared
    n_ffn = {"all": 1, "none": L, "attention": L, "ffn": 1}[c.sharing]
    pooler = H * H + H
    mlm = H * E + E + 2 * E + V  # dense H -> E, LayerNorm(E), decoder bias (decoder weight = the word table)
    sop = 2 * H + 2
    return emb + n_attn * attn + n_ffn * ffn + pooler + mlm + sop


@pytest.mark.parametrize("study", [s for s in STUDIES])
def test_every_cell_has_the_closed_form_parameter_count(study):
    base = AlbertConfig(**TINY)
    cells = build_grid(study, base)
    assert len({c.name for c in cells}) == len(cells) >= 2
    counts = {}
    for cell in cells:
        config = cell.config(base)
        counts[cell.name] = AlbertForPreTraining(config).num_parameters()
        assert counts[cell.name] == expected_parameters(config), cell.name
    if study == "depth":  # all-shared: the same count at every depth (Table 11)
        assert len(set(counts.values())) == 1 and [c.model["num_hidden_layers"] for c in cells] == [1, 2, 4, 8]
    if study == "embedding-size":  # V·E + E·H: the count grows with E by (V + H + P + T + 3 + H) per unit of E ...
        V, H = base.vocab_size, base.hidden_size
        per_e = V + base.max_position_embeddings + base.type_vocab_size + 2 + H + H + 1 + 2
        a, b = counts["E4-all-shared"], counts["E8-all-shared"]
        assert b - a == 4 * per_e
        # ... and not sharing adds (L - 1) layers' worth, whatever E is
        layer = 4 * H * H + 6 * H + 2 * H * base.intermediate_size + base.intermediate_size + 3 * H
        assert counts["E16-not-shared"] - counts["E16-all-shared"] == (base.num_hidden_layers - 1) * layer
    if study == "sharing":
        assert counts["all-shared"] < counts["shared-attention"] < counts["not-shared"]
        assert counts["all-shared"] < counts["shared-FFN"] < counts["not-shared"]


def test_grid_contents_and_the_default_base_matches_the_quickstart_model():
    base = AlbertConfig(**DEFAULT_BASE)
    with open(os.path.join(os.path.dirname(__file__), "..", "scripts", "quickstart_model.json")) as f:
        quick = json.load(f)
    assert quick == DEFAULT_BASE
    assert [c.name for c in build_grid("inter-sentence", base)] == ["none", "nsp", "sop", "sop-official"]
    assert [c.inter_sentence_task for c in build_grid("inter-sentence", base)] == ["none", "nsp", "sop", "sop-official"]
    assert [c.name for c in build_grid("sharing", base)] == [
        "all-shared",
        "shared-attention",
        "shared-FFN",
        "not-shared",
    ]
    assert [c.data_fraction for c in build_grid("data", base)] == [0.25, 0.5, 1.0]
    width = build_grid("width", base)
    assert [c.config(base).hidden_size for c in width] == [64, 128, 256]
    assert {c.config(base).num_hidden_layers for c in width} == {3}
    assert {c.config(base).head_size for c in width} == {base.head_size}
    sizes = [c.config(base).embedding_size for c in build_grid("embedding-size", base)]
    assert sizes == [16, 32, 64, 128] * 2
    assert [c.system for c in build_grid("system", base)] == ["litebert", "transformers"]
    assert [c.paper_key for c in build_grid("inter-sentence", base)] == ["none", "nsp", "sop", None]
    # the paper's row at the same shape relative to the base (H 128 here, H 768 / 1024 there), not the same number
    assert [c.paper_key for c in build_grid("embedding-size", base)] == [
        "E64-not-shared",
        "E128-not-shared",
        "E256-not-shared",
        "E768-not-shared",
        "E64-all-shared",
        "E128-all-shared",
        "E256-all-shared",
        "E768-all-shared",
    ]
    assert [c.paper_key for c in build_grid("depth", base)] == ["L1", "L3", "L6", "L12"]
    assert [c.paper_key for c in width] == [None, "H1024", "H2048"]


def test_unknown_study_or_cell_is_a_clear_error(tmp_path, capsys):
    base = AlbertConfig(**TINY)
    with pytest.raises(LitebertError, match=r"unknown study 'depht'.*depth"):
        build_grid("depht", base)
    with pytest.raises(LitebertError, match=r"unknown cell\(s\) 'L3' for study 'depth'.*L1, L2, L4, L8"):
        select_cells(build_grid("depth", base), ["L1", "L3"])
    with pytest.raises(LitebertError, match="give --steps N or --budget-minutes M"):
        AblateConfig(study="depth", corpus=["x"], output=str(tmp_path))
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c.\n")
    # the cell is checked before any data work: nothing but the error, no DIR/data
    rc = main(
        [
            "ablate",
            "--study",
            "depth",
            "--corpus",
            str(corpus),
            "--output",
            str(tmp_path / "o"),
            "--steps",
            "2",
            "--cells",
            "L3",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: unknown cell(s) 'L3'")
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit) as exc:
        main(["ablate", "--study", "widht", "--corpus", str(corpus), "--output", str(tmp_path / "o"), "--steps", "2"])
    assert exc.value.code == 2 and "invalid choice: 'widht'" in capsys.readouterr().err


def test_wilson_interval_hand_computed():
    from litebert.ablate import wilson_interval

    lo, hi = wilson_interval(50, 100)  # p = 0.5, n = 100: 0.5 ± 1.96·sqrt(0.0025 + 0.00009604) / 1.0384
    assert lo == pytest.approx(0.40383, abs=1e-4) and hi == pytest.approx(0.59617, abs=1e-4)
    lo, hi = wilson_interval(0, 10)  # upper bound z²/(n + z²) = 3.8415 / 13.8415
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(3.841459 / 13.841459, abs=1e-6)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, shared_data):
    root = tmp_path_factory.mktemp("ablate_corpus")
    text = (shared_data / "wikitext-2" / "wiki.valid.tokens").read_text(encoding="utf-8")
    train, held = root / "train.txt", root / "valid.txt"
    train.write_text(text[:120_000], encoding="utf-8")
    held.write_text(text[-40_000:], encoding="utf-8")
    base = root / "base.json"
    base.write_text(json.dumps(TINY))
    from litebert.tokenization import train_tokenizer

    train_tokenizer([train], "sentencepiece", TINY["vocab_size"], root / "tok")  # once for every study below
    return train, held, base, root / "tok"


def _cfg(corpus, out, **kw):
    train, held, base, tok = corpus
    return AblateConfig(
        **{
            "study": "depth",
            "corpus": [str(train)],
            "eval_corpus": [str(held)],
            "output": str(out),
            "tokenizer": str(tok),
            "steps": 6,
            "base_config": str(base),
            "batch_size": 8,
            "max_seq_length": 32,
            "max_predictions_per_seq": 8,
            "save_steps": 3,
            "cells": ["L1", "L2"],
            **kw,
        }
    )


def test_ablate_writes_results_and_resumes_a_half_finished_study(corpus, tmp_path):
    out = tmp_path / "study"
    res = ablate(_cfg(corpus, out), log=lambda *a: None)
    assert res.trained == ["L1/42", "L2/42"]
    lines = (out / "results.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert [(r["study"], r["cell"], r["seed"]) for r in records] == [("depth", "L1", 42), ("depth", "L2", 42)]
    for r in records:
        assert set(RESULT_FIELDS) <= set(r)
        assert r["steps"] == 6 and r["seconds"] > 0
        assert 0 <= r["mlm_accuracy"] <= 1 and 0 <= r["sop_accuracy"] <= 1 and 0 <= r["nsp_accuracy"] <= 1
        assert r["sop_sequences"] > 20 and r["nsp_sequences"] > 20 and r["mlm_tokens"] > 100
        lo, hi = r["sop_ci95"]
        assert lo < r["sop_accuracy"] < hi
    assert records[0]["parameters"] == records[1]["parameters"]  # all-shared depth: constant count
    md = (out / "depth.md").read_text()
    assert "| L1 |" in md and "| L2 |" in md and "Table 11" in md and (out / "depth.png").stat().st_size > 1000

    # the held-out evaluation agrees with pretrain's own evaluation (an independent implementation)
    from litebert.training.loop import make_batch_factory
    from litebert.training.pretrain import _read_data, make_pretraining_eval

    model = AlbertForPreTraining.from_pretrained(out / "depth" / "L2" / "final")
    plan = json.loads((out / "depth" / "L2" / "ablate_plan.json").read_text())
    sop_dir = plan["eval_data"]["sop"]
    _, ds = _read_data(sop_dir, "eval")
    ref = make_pretraining_eval(
        make_batch_factory(ds, 8, ds.collator(), seed=0, shuffle=False, drop_last=False), torch.device("cpu")
    )(model)
    ours = evaluate_model(model, plan["eval_data"], batch_size=16)
    assert ours["mlm_accuracy"] == pytest.approx(ref["mlm_accuracy"], abs=1e-9)
    assert ours["mlm_loss"] == pytest.approx(ref["mlm_loss"], rel=1e-5)
    assert ours["sop_accuracy"] == pytest.approx(ref["sop_accuracy"], abs=1e-9)
    assert all(records[1][k] == pytest.approx(v, nan_ok=True) for k, v in ours.items())  # the record holds these

    # half-finished study: L1 done; L2 interrupted after its step-3 checkpoint (no final/, no result)
    l1_final = (out / "depth" / "L1" / "final" / "model.safetensors").stat().st_mtime_ns
    l2 = out / "depth" / "L2"
    import shutil

    before = (l2 / "final" / "model.safetensors").read_bytes()
    shutil.rmtree(l2 / "final")
    shutil.rmtree(l2 / "checkpoints" / "step-6")
    (l2 / "ablate_result.json").unlink()
    (l2 / "pretrain_result.json").unlink()
    assert (l2 / "checkpoints" / "step-3").is_dir()
    res2 = ablate(_cfg(corpus, out), log=lambda *a: None)
    assert res2.trained == ["L2/42"]  # L1 was not rerun
    assert (out / "depth" / "L1" / "final" / "model.safetensors").stat().st_mtime_ns == l1_final
    assert (l2 / "run_settings.resume-step-3.json").is_file()  # L2 resumed from its checkpoint ...
    assert (l2 / "final" / "model.safetensors").read_bytes() == before  # ... to the same weights (exact resume)
    again = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["cell"] for r in again] == ["L1", "L2"]
    assert again[1]["steps"] == 6 and again[1]["mlm_accuracy"] == records[1]["mlm_accuracy"]
    # a finished study does nothing but rewrite the outputs
    assert ablate(_cfg(corpus, out), log=lambda *a: None).trained == []


def test_sop_official_data_leaks_other_document_pairs_only_from_one_sentence_chunks(tmp_path, shared_data):
    """The official SOP data (google-research/albert): a one-sentence chunk gets B from another document, label 1."""
    import numpy as np

    from litebert.data import META_FIELDS, PrepareConfig, PretrainingDataset, prepare
    from litebert.tokenization import train_tokenizer

    corpus = tmp_path / "c.txt"
    corpus.write_text((shared_data / "wikitext-2" / "wiki.valid.tokens").read_text(encoding="utf-8")[:150_000])
    train_tokenizer([corpus], "sentencepiece", 300, tmp_path / "tok")
    meta = {}
    for task in ("sop", "sop-official"):
        prepare(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(tmp_path / "tok"),
                output=str(tmp_path / task),
                max_seq_length=32,
                inter_sentence_task=task,
                seed=3,
                progress=False,
            )
        )
        meta[task] = PretrainingDataset(tmp_path / task).meta
    col = {n: i for i, n in enumerate(META_FIELDS)}
    for task, m in meta.items():
        cross = m[:, col["b_doc"]] != m[:, col["doc"]]
        one = m[:, col["sent_end"]] - m[:, col["sent_start"]] == 1
        label = m[:, col["label"]]
        if task == "sop":
            assert not cross.any()  # litebert's SOP: A and B always from one document
        else:
            assert one.sum() > 20 and np.array_equal(cross, one)  # exactly the one-sentence chunks cross ...
            assert (label[cross] == 1).all()  # ... labelled 1, like a swap
            assert 0.4 < label[~cross].mean() < 0.6  # the rest is plain SOP
    # both read the same documents in the same chunks: the same number of instances
    assert len(meta["sop"]) == len(meta["sop-official"])


def test_system_study_trains_transformers_with_trainer_and_scores_it_like_litebert(corpus, tmp_path):
    pytest.importorskip("accelerate")
    out = tmp_path / "system"
    res = ablate(_cfg(corpus, out, study="system", cells=None, steps=3), log=lambda *a: None)
    lit, hf = res.records
    assert (lit["cell"], hf["cell"]) == ("litebert", "transformers")
    assert lit["parameters"] == hf["parameters"]  # the same configuration (all-shared: HF can build it)
    assert hf["steps"] == 3 and hf["tokens"] > 0 and 0 <= hf["mlm_accuracy"] <= 1
    import transformers

    m = transformers.AlbertForMaskedLM.from_pretrained(out / "system" / "transformers" / "final")
    assert m.config.embedding_size == 16 and m.config.num_hidden_layers == 4
    assert "transformers" in (out / "system.md").read_text()


def test_budget_minutes_stops_by_time_and_alone_estimates_the_schedule(corpus, tmp_path):
    out = tmp_path / "budget"
    # a schedule of 500 steps and a limit no step can stay under: the run stops after its first step
    rec = ablate(_cfg(corpus, out, steps=500, budget_minutes=1e-6, cells=["L1"]), log=lambda *a: None).records[0]
    assert rec["steps"] == 1 and rec["max_steps"] == 500 and rec["budget_minutes"] == 1e-6
    assert (out / "depth" / "L1" / "checkpoints" / "step-1").is_dir()
    # --budget-minutes alone: the schedule length comes from a timed probe of the cell (at least 10 steps)
    plan_cfg = _cfg(corpus, tmp_path / "alone", steps=None, budget_minutes=1e-6, cells=["L2"])
    rec = ablate(plan_cfg, log=lambda *a: None).records[0]
    assert rec["max_steps"] >= 10 and rec["steps"] == 1
