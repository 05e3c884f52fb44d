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


def test_a_base_config_with_inner_groups_is_refused_before_anything_is_written(tmp_path, capsys):
    """The cells are defined for inner_group_num 1 (the paper's ALBERT): with 2, "L1" ran 2 layers, "L8" 16 and
    "all-shared" had 2 distinct layers, so the names, the tables and the closed-form count would be false."""
    grouped = {**TINY, "num_hidden_groups": 2, "inner_group_num": 2}
    base = AlbertConfig(**grouped)
    with pytest.raises(LitebertError, match=r"^the base config: inner_group_num 2, expected 1: .*set inner_group_num"):
        build_grid("depth", base)
    # what the cells would be: depth "L1" with two distinct layers run (and more parameters than the closed form)
    l1 = base.replace(num_hidden_layers=1, num_hidden_groups=1, sharing="all")
    assert AlbertForPreTraining(l1).num_parameters() > expected_parameters(l1)
    config = tmp_path / "grouped.json"
    config.write_text(json.dumps(grouped))
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c.\n")
    argv = ["ablate", "--study", "sharing", "--corpus", str(corpus), "--output", str(tmp_path / "o"), "--steps", "2"]
    assert main([*argv, "--base-config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --base-config {config}: inner_group_num 2, expected 1: ")
    assert not (tmp_path / "o").exists()


def test_wilson_interval_hand_computed():
    from litebert.ablate import wilson_interval

    lo, hi = wilson_interval(50, 100)  # p = 0.5, n = 100: 0.5 ± 1.96·sqrt(0.0025 + 0.00009604) / 1.0384
    assert lo == pytest.approx(0.40383, abs=1e-4) and hi == pytest.approx(0.59617, abs=1e-4)
    lo, hi = wilson_interval(0, 10)  # upper bound z²/(n + z²) = 3.8415 / 13.8415
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(3.841459 / 13.841459, abs=1e-6)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_wilson_interval_lies_in_0_1_and_is_exact_at_0_and_n():
    """At 0 successes the Wilson bounds are 0 and z²/(n + z²), at n they are n/(n + z²) and 1 (closed form); the
    formula centre ∓ half gave -2.2e-19 for 0 of 1,883 masked tokens, printed "[-0.0, 0.2]" (and 1 + 1e-16 at n)."""
    from litebert.ablate import wilson_interval

    z2 = 1.959964**2
    from litebert.ablate.report import table_markdown

    old = dict(study="dropout", cell="dropout-0", seed=42, parameters=1, steps=5, seconds=1.0, tokens=1, mlm_loss=8.6)
    old.update(mlm_accuracy=0.0, mlm_tokens=1883, mlm_ci95=[-2.168404344971009e-19, 0.0020359203277065963])
    old.update(sop_accuracy=0.5, sop_ci95=[0.4, 0.6], nsp_accuracy=0.5, nsp_ci95=[0.4, 0.6])
    assert "| 0.0 [0.0, 0.2] |" in table_markdown("dropout", [old])  # a record written before the clamp
    for n in [*range(1, 300), 1883]:
        lo, hi = wilson_interval(0, n)
        assert lo == 0.0 and hi == pytest.approx(z2 / (n + z2), rel=1e-12), n
        lo, hi = wilson_interval(n, n)
        assert hi == 1.0 and lo == pytest.approx(n / (n + z2), rel=1e-12), n
        for c in (1, n // 2, n - 1):
            lo, hi = wilson_interval(c, n)
            assert 0.0 <= lo <= c / n <= hi <= 1.0


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


def _cfg(fixture, out, **kw):
    train, held, base, tok = fixture
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
    md = (out / "depth.md").read_text()  # the steps column is what the header says: run / schedule
    assert "a schedule of 500 steps, stopped at 1e-06 wall-clock minutes (the steps column: steps run / schedule" in md
    assert next(line for line in md.splitlines() if line.startswith("| L1 |")).split(" | ")[2] == "1 / 500"
    # --budget-minutes alone: the schedule length comes from a timed probe of the cell (at least 10 steps)
    plan_cfg = _cfg(corpus, tmp_path / "alone", steps=None, budget_minutes=1e-6, cells=["L2"])
    rec = ablate(plan_cfg, log=lambda *a: None).records[0]
    assert rec["max_steps"] >= 10 and rec["steps"] == 1


# ---------------------------------------------------------------------------------------------- reruns
@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory):
    """A depth study with L1 and L4 finished (6 steps, checkpoints at 3 and 6); tests work on copies of it."""
    out = tmp_path_factory.mktemp("finished") / "study"
    ablate(_cfg(corpus, out, cells=["L1", "L4"]), log=lambda *a: None)
    return out


def _copy(src, dest):
    import shutil

    shutil.copytree(src, dest)
    return dest


def _tree(root) -> dict:
    """Every file under ``root`` with its size and mtime: what a refused command must leave as it was."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def _ablate_cli(corpus, out, *extra):
    train, held, base, tok = corpus
    argv = ["ablate", "--study", "depth", "--corpus", str(train), "--eval-corpus", str(held), "--output", str(out)]
    argv += ["--tokenizer", str(tok), "--base-config", str(base), "--batch-size", "8", "--max-seq-length", "32"]
    argv += ["--max-predictions-per-seq", "8", "--save-steps", "3", *extra]
    return main(argv)


def test_a_rerun_with_other_training_settings_is_refused_naming_cell_setting_and_remedy(
    corpus, finished, tmp_path, capsys
):
    out = _copy(finished, tmp_path / "study")
    before = _tree(out)
    assert json.loads((out / "depth.settings.json").read_text())["steps"] == 6
    for extra, diff in (
        (["--steps", "8"], "--steps 6 -> 8"),
        (["--steps", "6", "--batch-size", "16"], "--batch-size 8 -> 16"),
        (["--steps", "6", "--learning-rate", "0.001"], "--learning-rate 0.002 -> 0.001"),
        (["--steps", "6", "--warmup-ratio", "0.5"], "warmup steps (--warmup-ratio x steps) 0 -> 3"),
        (["--steps", "6", "--data-seed", "7"], "--data-seed 12345 -> 7"),
        (["--steps", "6", "--masked-lm-prob", "0.15"], "--masked-lm-prob 0.3 -> 0.15"),
    ):
        rc = _ablate_cli(corpus, out, *extra, "--cells", "L1")
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        assert err[0].startswith("error: depth/L1 was planned with other settings than this command: "), err[0]
        assert diff in err[0] and f"delete {out / 'depth' / 'L1'} to train it again" in err[0]
        assert "give a new --output" in err[0]
    # a cell that is not selected is checked too (the study's report holds it), and so is a half-finished one
    (out / "depth" / "L4" / "ablate_result.json").rename(tmp_path / "L4-result.json")
    import shutil

    shutil.move(out / "depth" / "L4" / "final", tmp_path / "L4-final")
    with pytest.raises(
        LitebertError, match=r"depth/L1 was planned .*--steps 6 -> 9 \(1 more cell\(s\) differ: depth/L4\)"
    ):
        ablate(_cfg(corpus, out, steps=9, cells=["L2"]), log=lambda *a: None)
    # the effective model config is compared: another base config changes every cell
    other = tmp_path / "base.json"
    other.write_text(json.dumps({**TINY, "hidden_size": 48, "num_attention_heads": 3}))
    with pytest.raises(LitebertError, match=r"depth/L1 .*model hidden_size 32 -> 48; model num_attention_heads 2 -> 3"):
        ablate(_cfg(corpus, out, base_config=str(other), cells=["L1"]), log=lambda *a: None)
    (tmp_path / "L4-result.json").rename(out / "depth" / "L4" / "ablate_result.json")
    shutil.move(tmp_path / "L4-final", out / "depth" / "L4" / "final")
    assert _tree(out) == before  # nothing was written: not the settings file, not a result, not a report
    assert json.loads((out / "depth.settings.json").read_text())["steps"] == 6

    # settings that do not change training are not compared: the finished cells are reported as they are
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    res = ablate(
        _cfg(corpus, out, threads=1, save_steps=2, workers=2, progress_bar=True, cells=["L4", "L1"]),
        log=lambda *a: None,
    )
    assert res.trained == [] and [r["cell"] for r in res.records] == ["L1", "L4"]
    assert [(r["mlm_accuracy"], r["seconds"]) for r in res.records] == [
        (r["mlm_accuracy"], r["seconds"]) for r in records
    ]
    saved = json.loads((out / "depth.settings.json").read_text())
    assert (saved["steps"], saved["save_steps"], saved["cells"]) == (6, 2, ["L4", "L1"])
    # what is compared: the settings the cell's plan recorded (corpus as the resolved file, with its size)
    recorded = json.loads((out / "depth" / "L1" / "ablate_plan.json").read_text())["settings"]
    assert recorded["corpus"] == [str(corpus[0].resolve())] and recorded["steps"] == 6
    assert recorded["corpus_bytes"] == [corpus[0].stat().st_size] and recorded["warmup_steps"] == 0


def test_a_cell_planned_before_the_settings_record_or_copied_from_another_study_is_described_by_its_files(
    corpus, finished, tmp_path
):
    """Cells made before ablate_plan.json held "settings", some copied from an identical cell of another study (a
    note, a patched study/cell name, the source's override dict): compared through cell_model_config.json,
    run_settings.json (its settings, data manifest and `litebert ablate` command line) and the plan."""
    train, held, _, tok = corpus
    out = tmp_path / "study"
    _copy(finished / "data", out / "data")
    copied = _copy(finished / "depth" / "L4", out / "sharing" / "all-shared")  # L4 = the all-shared base model
    plan = json.loads((copied / "ablate_plan.json").read_text())
    plan.pop("settings", None)
    plan.update(study="sharing", cell="all-shared", note="copied from depth/L4: the identical run")
    plan["cell_definition"].update(study="sharing", name="all-shared")
    assert plan["cell_definition"]["model"] != {}  # the grid's all-shared overrides nothing but sharing
    (copied / "ablate_plan.json").write_text(json.dumps(plan))
    settings = json.loads((copied / "run_settings.json").read_text())
    rel = os.path.relpath(train, os.getcwd())  # the command line named the corpus relative to its directory
    assert not os.path.isabs(rel)
    settings["argv"] = ["litebert", "ablate", "--study", "depth", "--corpus", rel, "--eval-corpus", str(held)]
    settings["argv"] += [f"--tokenizer={tok}", "--steps", "6", "--cells", "L4"]
    (copied / "run_settings.json").write_text(json.dumps(settings))
    record = json.loads((copied / "ablate_result.json").read_text())
    record.update(study="sharing", cell="all-shared")
    (copied / "ablate_result.json").write_text(json.dumps(record))

    res = ablate(_cfg(corpus, out, study="sharing", cells=["all-shared"]), log=lambda *a: None)
    assert res.trained == [] and res.records[0]["mlm_accuracy"] == record["mlm_accuracy"]
    for kw, diff in (
        ({"steps": 7}, "--steps 6 -> 7"),
        ({"learning_rate": 1e-3}, "--learning-rate 0.002 -> 0.001"),
        ({"batch_size": 4}, "--batch-size 8 -> 4"),
        ({"corpus": [str(held)]}, f"--corpus {train.resolve()} -> {held.resolve()}"),
        ({"tokenizer": None}, "--tokenizer vocabulary sha256 "),
        ({"eval_corpus": None}, "held-out text (--eval-corpus / --eval-fraction) --eval-corpus -> the last 0.05"),
    ):
        with pytest.raises(LitebertError, match="sharing/all-shared was planned with other settings") as exc:
            ablate(_cfg(corpus, out, study="sharing", cells=["not-shared"], **kw), log=lambda *a: None)
        assert diff in str(exc.value)
    assert not (out / "sharing" / "not-shared").exists()


def _reseal(checkpoint, edit) -> None:
    """Apply ``edit`` to a checkpoint's trainer_state.json and rewrite its COMPLETE marker to match."""
    from litebert.fileio import sha256_file

    path = checkpoint / "trainer_state.json"
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))
    marker = json.loads((checkpoint / "COMPLETE").read_text())
    marker["files"]["trainer_state.json"] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    (checkpoint / "COMPLETE").write_text(json.dumps(marker))


def test_a_resumed_cell_reports_the_time_of_every_segment(corpus, finished, tmp_path):
    import shutil
    import time

    out = _copy(finished, tmp_path / "study")
    l1 = out / "depth" / "L1"
    ckpt = l1 / "checkpoints" / "step-3"
    state = json.loads((ckpt / "trainer_state.json").read_text())["loop"]
    # the clocks travel in the checkpoint
    assert state.get("train_cpu_seconds", 0) > 0 and 0 < state.get("train_seconds", 0) < 60

    def interrupt_after_step_3():
        for p in ("final", "checkpoints/step-6"):
            shutil.rmtree(l1 / p)
        for p in ("ablate_result.json", "pretrain_result.json"):
            (l1 / p).unlink()

    # the first segment ran 1000 s (CPU 900 s) before its step-3 checkpoint: the resumed cell adds its own time
    interrupt_after_step_3()
    _reseal(ckpt, lambda s: s["loop"].update(train_seconds=1000.0, train_cpu_seconds=900.0))
    wall, cpu = time.perf_counter(), time.process_time()
    res = ablate(_cfg(corpus, out, cells=["L1"]), log=lambda *a: None)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rec = res.records[0]
    assert res.trained == ["L1/42"] and rec["steps"] == 6
    assert 1000.0 <= rec["seconds"] <= 1000.0 + wall + 0.1
    assert 900.0 <= rec["cpu_seconds"] <= 900.0 + cpu + 0.1
    assert json.loads((out / "results.jsonl").read_text().splitlines()[0])["seconds"] == rec["seconds"]
    row = next(line for line in (out / "depth.md").read_text().splitlines() if line.startswith("| L1 |"))
    assert row.split(" | ")[3] == str(round(rec["seconds"]))
    final = json.loads((l1 / "checkpoints" / "step-6" / "trainer_state.json").read_text())["loop"]
    assert final["train_seconds"] > 1000.0 and final["train_cpu_seconds"] >= 900.0

    # a checkpoint written before the clocks existed still resumes; the time then starts at that resume
    interrupt_after_step_3()
    _reseal(ckpt, lambda s: [s["loop"].pop(k) for k in ("train_seconds", "train_cpu_seconds")])
    rec = ablate(_cfg(corpus, out, cells=["L1"]), log=lambda *a: None).records[0]
    assert rec["steps"] == 6 and 0 <= rec["seconds"] < 1000.0 and 0 <= rec["cpu_seconds"] < 900.0


def test_bad_inputs_are_refused_before_anything_is_written(corpus, tmp_path, capsys):
    train = corpus[0]
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n \n")
    not_tok = tmp_path / "notmodel"
    not_tok.mkdir()
    (not_tok / "readme.txt").write_text("no tokenizer here")
    out = tmp_path / "abl"

    def run(*argv):
        rc = main(["ablate", "--study", "depth", "--steps", "2", "--cells", "L1", *argv])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        return err[0]

    assert run("--corpus", str(tmp_path / "nonexist.txt"), "--output", str(out)) == (
        f"error: --corpus: corpus file not found: {tmp_path / 'nonexist.txt'}"
    )
    assert run("--corpus", str(empty), "--output", str(out)) == f"error: --corpus: corpus file is empty: {empty}"
    msg = run("--corpus", str(train), "--eval-corpus", str(tmp_path / "nope.txt"), "--output", str(out))
    assert msg == f"error: --eval-corpus: corpus file not found: {tmp_path / 'nope.txt'}"
    msg = run("--corpus", str(train), "--tokenizer", str(not_tok), "--output", str(out))
    assert msg.startswith(f"error: --tokenizer {not_tok}: not a tokenizer directory (")
    assert run("--corpus", str(train), "--tokenizer", str(tmp_path / "nodir"), "--output", str(out)) == (
        f"error: --tokenizer {tmp_path / 'nodir'}: no such directory"
    )
    msg = run("--corpus", str(train), "--output", str(empty))
    assert msg.startswith(f"error: --output {empty}: not a directory; give a new directory or the study directory")
    msg = run("--corpus", str(train), "--output", str(empty / "sub"))
    assert msg.startswith(f"error: --output {empty / 'sub'}: not a directory ({empty} is a file)")
    assert not out.exists() and empty.read_text() == "\n \n"
    # a non-empty directory that is not a study directory (a finetune run, a folder of files) is refused as is
    run_dir = tmp_path / "ft"
    run_dir.mkdir()
    (run_dir / "run_settings.json").write_text('{"command": "finetune"}')
    (run_dir / "eval_results.json").write_text("{}")
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("x")
    for d, names in ((run_dir, "eval_results.json, run_settings.json"), (other, "x.txt")):
        assert run("--corpus", str(train), "--output", str(d)) == (
            f"error: --output {d} is not empty (holds {names}) and is not a study directory of an earlier "
            "`litebert ablate`: choose a new or empty --output (nothing was written or deleted)"
        )
    assert sorted(p.name for p in run_dir.iterdir()) == ["eval_results.json", "run_settings.json"]
    assert [p.name for p in other.iterdir()] == ["x.txt"]


def test_study_directories_are_recognised(finished, tmp_path):
    from litebert.ablate.run import is_study_dir

    assert is_study_dir(finished) and not is_study_dir(tmp_path)
    (tmp_path / "depth.settings.json").write_text("{}")
    assert is_study_dir(tmp_path)
    old = tmp_path / "old"  # a study of a version before the settings file: its planned cells
    (old / "sharing" / "all-shared").mkdir(parents=True)
    assert not is_study_dir(old)
    (old / "sharing" / "all-shared" / "ablate_plan.json").write_text("{}")
    assert is_study_dir(old)


def test_too_little_data_fails_before_the_cell_and_removes_only_what_the_call_made(corpus, finished, tmp_path, capsys):
    _, held, base, tok = corpus
    tiny = tmp_path / "two-lines.txt"
    tiny.write_text("The first sentence of a tiny corpus . It has two .\n\nAnother document with a line .\n")
    out = tmp_path / "new" / "abl"
    rc = _ablate_cli(
        (tiny, held, base, tok), out, "--steps", "2", "--cells", "L1", "--batch-size", "16", "--threads", "1"
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert (
        err[0] == "error: depth/L1: its training data holds 2 pair(s), less than one batch of --batch-size 16: give "
        "more text (--corpus) or a smaller --batch-size"
    )
    assert not (tmp_path / "new").exists()  # no abl/, no data/, no depth/L1, no depth.settings.json

    # into a study directory of earlier runs: only this call's study, cell, settings file and data go again
    out = _copy(finished, tmp_path / "study")
    before = _tree(out)
    with pytest.raises(
        LitebertError,
        match=r"dropout/dropout-0: its training data holds 2 pair\(s\), less than one batch of --batch-size 8",
    ):
        ablate(_cfg(corpus, out, study="dropout", cells=["dropout-0"], corpus=[str(tiny)]), log=lambda *a: None)
    assert _tree(out) == before


def test_a_binary_corpus_is_named_by_the_users_file_and_line_not_a_deleted_split_file(corpus, tmp_path, capsys):
    """The held-out split cuts the corpus into files under data/split-*/ that a failed call deletes: errors name the
    corpus file the user gave, and its line."""
    _, _, base, tok = corpus
    binary = tmp_path / "binary.bin"
    binary.write_bytes(bytes(range(128, 256)) * 40 + b"\n" + bytes(range(128, 256)) * 40 + b"\n")
    out = tmp_path / "abl"
    argv = ["ablate", "--study", "depth", "--cells", "L1", "--steps", "2", "--base-config", str(base)]
    assert main([*argv, "--tokenizer", str(tok), "--corpus", str(binary), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [  # the held-out part (the last line) is prepared first: its line 1 is the file's line 2
        f"error: no instances were made: {binary} (its held-out part) gave no document; 1 line(s) were skipped as "
        f"invalid (first: {binary}:2), check --format and the file's encoding"
    ]
    assert "split-" not in err[0] and not out.exists()
    one = tmp_path / "one.txt"
    one.write_text("hello world .\n")
    assert main([*argv, "--tokenizer", str(tok), "--corpus", str(one), "--output", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [f"error: corpus file is empty: {one} (its training part)"] and not out.exists()


def test_table_gives_the_mlm_interval_and_finetune_metrics_in_percent():
    """docs/ablations.md: "MLM acc" carries its 95 % interval (one seed); the fine-tuning metric is in % like the
    other accuracies (it was printed as the fraction 0.5200) with ± sd over seeds."""
    from litebert.ablate import wilson_interval
    from litebert.ablate.report import table_markdown

    base = dict(study="dropout", parameters=784770, steps=10, seconds=5.0, tokens=40960, mlm_loss=6.5)
    base.update(sop_accuracy=0.55, sop_ci95=[0.481, 0.617], nsp_accuracy=0.5, nsp_ci95=[0.43, 0.57])
    one = dict(base, cell="dropout-0", seed=1, mlm_accuracy=0.038, mlm_tokens=4000, finetune_accuracy=0.52)
    lo, hi = wilson_interval(152, 4000)  # 3.8 % of 4,000 tokens
    row = next(ln for ln in table_markdown("dropout", [one]).splitlines() if ln.startswith("| dropout-0 "))
    assert f"| 3.8 [{100 * lo:.1f}, {100 * hi:.1f}] |" in row and "| 52.0 |" in row
    seeds = [dict(one, seed=1, finetune_accuracy=0.50), dict(one, seed=2, finetune_accuracy=0.54)]
    row = next(ln for ln in table_markdown("dropout", seeds).splitlines() if ln.startswith("| dropout-0 "))
    assert "| 52.0 ± 2.8 |" in row  # mean 0.52, sd 0.0283


def test_table_header_tells_every_evaluation_set_and_the_steps_column_reads_run_of_schedule():
    """The header was written from the first record: rows scored on 200 and 100 held-out pairs shared one table under
    "SOP 200, NSP 200", and under --budget-minutes it called the steps column the schedule while it held the steps
    run (24 of a 25-step schedule showed as "24")."""
    from litebert.ablate.report import table_markdown

    def record(cell, steps, max_steps, sequences, tokens, **kw):
        return dict(
            study="embedding-size", cell=cell, seed=42, parameters=1000, steps=steps, max_steps=max_steps,
            seconds=1.0, tokens=4096, mlm_loss=7.0, mlm_accuracy=0.01, mlm_tokens=tokens, sop_accuracy=0.5,
            sop_sequences=sequences, nsp_accuracy=0.5, nsp_sequences=sequences, **kw,
        )  # fmt: skip

    same = [record("E16-all-shared", 20, 20, 200, 3783), record("E128-not-shared", 20, 20, 200, 3783)]
    header = table_markdown("embedding-size", same).splitlines()[2]
    assert (
        "a schedule of 20 steps;" in header
        and "held-out sequences: SOP 200, NSP 200; masked tokens scored: 3783" in header
    )
    mixed = [*same, record("E32-all-shared", 20, 20, 100, 1883)]
    header = table_markdown("embedding-size", mixed).splitlines()[2]
    assert "SOP 200" not in header.split("differs")[0]  # no single size claimed for every row
    assert (
        "held-out evaluation differs between cells, so their rows are not comparable: SOP 200, NSP 200, 3783 masked "
        "tokens (E16-all-shared, E128-not-shared); SOP 100, NSP 100, 1883 masked tokens (E32-all-shared)"
    ) in header

    timed = [
        record("dropout-0.1", 23, 23, 200, 3783, budget_minutes=0.3),
        record("dropout-0", 24, 25, 200, 3783, budget_minutes=0.3),
    ]
    for r in timed:
        r["study"] = "dropout"
    lines = table_markdown("dropout", timed).splitlines()
    assert lines[2].startswith(
        "Budget per cell: schedules of 23, 25 steps, stopped at 0.3 wall-clock minutes (the steps column: steps run / "
        "schedule, where a cell stopped before its schedule ended);"
    )
    steps = {ln.split(" | ")[0][2:]: ln.split(" | ")[2] for ln in lines if ln.startswith("| dropout-")}
    assert steps == {"dropout-0.1": "23", "dropout-0": "24 / 25"}
    # a time limit that stopped no cell: the column is the schedule, as the header says
    header = table_markdown("dropout", [dict(timed[0])]).splitlines()[2]
    assert header.startswith("Budget per cell: a schedule of 23 steps, stopped at 0.3 wall-clock minutes;")


def test_a_rerun_with_other_evaluation_settings_is_refused(corpus, finished, tmp_path):
    """--max-eval-sequences and --eval-corpus change what is measured: a study whose cells were scored on one held-out
    set refuses a command that would score new cells on another (rows of 200 and 100 pairs shared one table)."""
    _, held, _, _ = corpus
    out = _copy(finished, tmp_path / "study")
    before = _tree(out)
    other = tmp_path / "valid-more.txt"
    other.write_text(held.read_text() + "\nOne more held-out line .\n")
    for kw, diff in (
        ({"max_eval_sequences": 10}, "--max-eval-sequences all -> 10"),
        ({"eval_corpus": [str(other)]}, f"--eval-corpus {held.resolve()} -> {other.resolve()}"),
    ):
        with pytest.raises(LitebertError, match="depth/L1 was planned with other settings than this command") as exc:
            ablate(_cfg(corpus, out, cells=["L2"], **kw), log=lambda *a: None)
        assert diff in str(exc.value) and "more cell(s) differ: depth/L4" in str(exc.value)
    assert _tree(out) == before
    recorded = json.loads((out / "depth" / "L1" / "ablate_plan.json").read_text())["settings"]
    assert recorded["max_eval_sequences"] is None and recorded["eval_corpus"] == [str(held.resolve())]
    assert recorded["eval_corpus_bytes"] == [held.stat().st_size]

    # cells planned before the evaluation settings were recorded: the command line that scored them tells
    for cell in ("L1", "L4"):
        run = out / "depth" / cell
        plan = json.loads((run / "ablate_plan.json").read_text())
        for key in ("max_eval_sequences", "eval_corpus", "eval_corpus_bytes"):
            plan["settings"].pop(key)
        (run / "ablate_plan.json").write_text(json.dumps(plan))
        settings = json.loads((run / "run_settings.json").read_text())
        settings["argv"] = ["litebert", "ablate", "--study", "depth", "--max-eval-sequences", "4000"]
        (run / "run_settings.json").write_text(json.dumps(settings))
    with pytest.raises(LitebertError, match=r"depth/L1 .*: --max-eval-sequences 4000 -> all"):
        ablate(_cfg(corpus, out, cells=["L1"]), log=lambda *a: None)
    res = ablate(_cfg(corpus, out, cells=["L1"], max_eval_sequences=4000), log=lambda *a: None)
    assert res.trained == []


@pytest.fixture
def sst2(shared_data, tmp_path):
    """A tiny SST-2: the first 64 training and 32 dev rows."""
    d = tmp_path / "sst2"
    d.mkdir()
    for name, rows in (("train.tsv", 65), ("dev.tsv", 33)):
        lines = (shared_data / "glue" / "SST-2" / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (d / name).write_text("".join(lines[:rows]), encoding="utf-8")
    return d


def test_finetune_task_added_to_a_finished_study_fine_tunes_its_cells(corpus, finished, sst2, tmp_path):
    """--finetune-task on a study whose cells are finished was silently ignored (no fine-tuning, no finetune_*
    fields, no FT column): a finished cell has final/, so it is fine-tuned then, without being retrained."""
    out = _copy(finished, tmp_path / "study")
    l1 = out / "depth" / "L1"
    weights = (l1 / "final" / "model.safetensors").stat().st_mtime_ns
    kw = {"cells": ["L1"], "finetune_task": "sst2", "finetune_data": str(sst2), "finetune_steps": 2}
    res = ablate(_cfg(corpus, out, **kw), log=lambda *a: None)
    rec = res.records[0]
    assert res.trained == [] and (l1 / "final" / "model.safetensors").stat().st_mtime_ns == weights
    dev = json.loads((l1 / "finetune-sst2" / "eval_results.json").read_text())  # the fine-tuning run's own metrics
    assert rec["finetune_task"] == "sst2" and rec["finetune_accuracy"] == dev["accuracy"]
    assert rec["finetune_num_examples"] == dev["num_examples"] == 32
    assert json.loads((l1 / "ablate_result.json").read_text())["finetune_accuracy"] == dev["accuracy"]
    lines = {json.loads(x)["cell"]: json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()}
    assert lines["L1"]["finetune_accuracy"] == dev["accuracy"] and "finetune_task" not in lines["L4"]
    md = (out / "depth.md").read_text().splitlines()
    head = next(ln for ln in md if ln.startswith("| cell |")).split(" | ")
    col = head.index("FT accuracy")
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ") for ln in md if ln.startswith("| L")}
    assert rows["L1"][col] == f"{100 * dev['accuracy']:.1f}" and rows["L4"][col] == "–"
    # the pretraining metrics are the record's as before
    before = json.loads((finished / "depth" / "L1" / "ablate_result.json").read_text())
    kept = {k: v for k, v in rec.items() if not k.startswith("finetune_")}
    assert json.dumps(kept, sort_keys=True) == json.dumps(before, sort_keys=True)
    # done once: a rerun reads the record
    stamp = (l1 / "finetune-sst2" / "eval_results.json").stat().st_mtime_ns
    again = ablate(_cfg(corpus, out, **kw), log=lambda *a: None).records
    assert [json.dumps(r, sort_keys=True) for r in again] == [json.dumps(rec, sort_keys=True)]
    assert (l1 / "finetune-sst2" / "eval_results.json").stat().st_mtime_ns == stamp


def test_finetune_rerun_with_other_settings_fine_tunes_again(corpus, finished, sst2, tmp_path):
    """`--finetune-task T` rerun with another --finetune-steps silently kept the first run's metrics (the record
    held T's metrics; short_finetune read any eval_results.json). The settings are recorded beside the metrics; other
    settings fine-tune again, the same ones reuse the run, also when the record was of another task meanwhile."""
    out = _copy(finished, tmp_path / "study")
    run = out / "depth" / "L1" / "finetune-sst2"
    kw = {"cells": ["L1"], "finetune_task": "sst2", "finetune_data": str(sst2)}

    def fine_tune(steps, **more):
        rec = ablate(_cfg(corpus, out, **kw, finetune_steps=steps, **more), log=lambda *a: None).records[0]
        config = json.loads((run / "run_settings.json").read_text())["finetune_config"]
        dev = json.loads((run / "eval_results.json").read_text())
        return rec, config, dev

    rec2, config, dev = fine_tune(2)
    assert rec2["finetune_settings"]["steps"] == 2 and config["max_steps"] == 2
    stamp = (run / "eval_results.json").stat().st_mtime_ns
    rec3, config, dev = fine_tune(3)
    assert config["max_steps"] == 3 and rec3["finetune_settings"]["steps"] == 3  # fine-tuned again
    assert rec3["finetune_accuracy"] == dev["accuracy"] and rec3["finetune_num_examples"] == dev["num_examples"]
    assert json.loads((out / "depth" / "L1" / "ablate_result.json").read_text())["finetune_settings"]["steps"] == 3
    assert (run / "eval_results.json").stat().st_mtime_ns != stamp
    # the FT columns hold metrics only, never the settings
    head = next(ln for ln in (out / "depth.md").read_text().splitlines() if ln.startswith("| cell |"))
    assert "FT settings" not in head and "FT accuracy" in head
    # same settings again: the record is kept, nothing rerun
    stamp = (run / "eval_results.json").stat().st_mtime_ns
    assert fine_tune(3)[0] == rec3 and (run / "eval_results.json").stat().st_mtime_ns == stamp
    # the record of another task in between, then T with other steps than T's run directory: fine-tuned again
    from litebert.ablate.finetune_cell import short_finetune

    result = out / "depth" / "L1" / "ablate_result.json"
    record = json.loads(result.read_text())
    result.write_text(json.dumps({**record, "finetune_task": "mrpc", "finetune_settings": {"task": "mrpc"}}))
    got = short_finetune(out / "depth" / "L1" / "final", run, "sst2", 2, record["seed"], str(sst2), log=lambda m: None)
    assert got["finetune_settings"]["steps"] == 2
    assert json.loads((run / "run_settings.json").read_text())["finetune_config"]["max_steps"] == 2


def test_the_last_resume_of_a_cell_is_read_including_a_second_resume_from_the_same_step(tmp_path):
    """A second resume from step N writes run_settings.resume-step-N-2.json (the first is kept); the cell's last
    command line is that one, not the first."""
    import json

    from litebert.ablate.provenance import _legacy_evaluation

    for name, sequences in (("run_settings.json", 10), ("run_settings.resume-step-3.json", 20)):
        argv = ["litebert", "ablate", "--max-eval-sequences", str(sequences)]
        (tmp_path / name).write_text(json.dumps({"argv": argv}))
    assert _legacy_evaluation(tmp_path)["max_eval_sequences"] == 20
    argv = ["litebert", "ablate", "--max-eval-sequences", "30"]
    (tmp_path / "run_settings.resume-step-3-2.json").write_text(json.dumps({"argv": argv}))
    assert _legacy_evaluation(tmp_path)["max_eval_sequences"] == 30
