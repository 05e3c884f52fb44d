"""``prepare`` (docs/algorithms.md §2): instances, recorded positions, determinism, shards + manifest, bad input; and the
dataset / collator / data-model check that training uses."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from litebert.cli import main
from litebert.data import (
    PrepareConfig,
    PretrainingCollator,
    PretrainingDataset,
    check_data_matches_model,
    prepare,
    read_documents,
    read_manifest,
    verify_checksums,
)
from litebert.data.instances import META_INDEX as M
from litebert.data.instances import truncated_lengths
from litebert.errors import LitebertError
from litebert.tokenization import load_tokenizer


def _wiki_prepared(tiny, name="wiki", **kw):
    return tiny.prepared(name, (str(tiny.wikitext_subset(60)),), str(tiny.tokenizer("sentencepiece")), **kw)


def _doc_tokens(corpus, tok):
    """Every document as the token stream the instances' positions refer to (empty sentences removed)."""
    docs = []
    for d in read_documents(corpus):
        ids = tok.encode_batch(d)
        docs.append(np.array([t for s in ids for t in s], np.int64))
    return docs


def _files_digest(d: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------------- rules
def test_truncation_closed_form_equals_loop():
    for la in range(0, 30):
        for lb in range(0, 30):
            for m in (1, 5, 17, 40):
                a, b = la, lb
                while a + b > m:
                    if a > b:
                        a -= 1
                    else:
                        b -= 1  # B on a tie
                assert truncated_lengths(la, lb, m) == (a, b)


def test_wikitext_instances_follow_spec(tiny):
    out = _wiki_prepared(tiny)
    ds = PretrainingDataset(out)
    man = read_manifest(out)
    tok = load_tokenizer(out / "tokenizer")
    cls, sep = tok.cls_token_id, tok.sep_token_id
    docs = _doc_tokens([tiny.wikitext_subset(60)], tok)
    assert man["counts"]["documents"] == len(docs) == 60
    meta = ds.meta
    assert len(ds) == man["counts"]["instances"] > 1000
    n_swapped = 0
    for i in range(len(ds)):
        raw = ds.raw(i)
        ids, m = raw["input_ids"], raw["meta"]
        la = int(m[M["len_a"]])
        n = len(ids)
        assert n <= 128
        # layout [CLS] A [SEP] B [SEP]
        assert ids[0] == cls and ids[la + 1] == sep and ids[-1] == sep
        assert not np.isin(ids[1 : la + 1], [cls, sep]).any() and not np.isin(ids[la + 2 : -1], [cls, sep]).any()
        assert la >= 1 and n - la - 3 >= 1
        doc = docs[m[M["doc"]]]
        assert m[M["b_doc"]] == m[M["doc"]]  # sop: never text of another document
        # the kept text is the document's text at the recorded positions
        assert np.array_equal(ids[1 : la + 1], doc[m[M["a_start"]] : m[M["a_end"]]])
        assert np.array_equal(ids[la + 2 : -1], doc[m[M["b_start"]] : m[M["b_end"]]])
        assert m[M["a_orig_start"]] <= m[M["a_start"]] < m[M["a_end"]] <= m[M["a_orig_end"]]
        assert m[M["b_orig_start"]] <= m[M["b_start"]] < m[M["b_end"]] <= m[M["b_orig_end"]]
        # consecutive text, in order (label 0) or swapped (label 1); never overlapping
        if m[M["label"]] == 0:
            assert m[M["a_orig_end"]] == m[M["b_orig_start"]]
        else:
            assert m[M["b_orig_end"]] == m[M["a_orig_start"]]
            n_swapped += 1
    share = n_swapped / len(ds)
    assert abs(share - 0.5) < 0.03, share
    # token types and item tensors
    item = ds[0]
    la = int(meta[0, M["len_a"]])
    assert item["token_type_ids"][: la + 2].eq(0).all() and item["token_type_ids"][la + 2 :].eq(1).all()
    assert item["attention_mask"].eq(1).all()
    assert set(item) == {"input_ids", "token_type_ids", "attention_mask", "labels", "sentence_order_label"}
    assert all(v.dtype == torch.int64 for v in item.values())


def test_short_targets_about_ten_percent(tmp_path, tiny):
    """Hand-built corpus of 3000 documents: the share of documents whose target is short is ≈ short_seq_prob."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(3000):
        for _ in range(4):
            lines.append(" ".join(rng.choice(words, size=12)) + " .")
        lines.append("")
    corpus = tmp_path / "docs.txt"
    corpus.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    prepare(
        PrepareConfig(
            corpus=[corpus],
            tokenizer=tiny.tokenizer("wordpiece"),
            output=out,
            progress=False,
            max_seq_length=64,
            format="bert",
        )
    )
    meta = PretrainingDataset(out).meta
    per_doc = {}
    for row in meta:
        per_doc[int(row[M["doc"]])] = int(row[M["target_len"]])
    short = np.mean([t < 61 for t in per_doc.values()])
    assert abs(short - 0.1) < 0.025, short


def test_single_long_sentence_document_gives_sop_pairs(tmp_path, tiny):
    corpus = tmp_path / "one.txt"
    corpus.write_text(" ".join(f"word{i % 50}" for i in range(400)) + "\n")
    out = tmp_path / "out"
    res = prepare(
        PrepareConfig(
            corpus=[corpus], tokenizer=tiny.tokenizer("wordpiece"), output=out, progress=False, format="bert", seed=3
        )
    )
    assert res.instances >= 1 and "every document is a single sentence" in res.summary
    ds = PretrainingDataset(out)
    for i in range(len(ds)):
        m = ds.raw(i)["meta"]
        assert m[M["sent_start"]] + 1 == m[M["sent_end"]]  # a chunk of one sentence
        assert m[M["a_end"]] > m[M["a_start"]] and m[M["b_end"]] > m[M["b_start"]]
        if m[M["label"]] == 0:
            first, second = M["a_orig_end"], M["b_orig_start"]
        else:
            first, second = M["b_orig_end"], M["a_orig_start"]
        assert m[first] == m[second]


def test_all_documents_one_short_sentence_is_a_clear_error(tmp_path, tiny):
    words = ["the", "of", "and"]
    tok = load_tokenizer(tiny.tokenizer("wordpiece"))
    assert all(len(tok.encode(w)) == 1 for w in words)
    corpus = tmp_path / "short.txt"
    corpus.write_text("\n\n".join(words) + "\n")
    with pytest.raises(LitebertError, match="no instances were made from 3 documents"):
        prepare(
            PrepareConfig(
                corpus=[corpus],
                tokenizer=tiny.tokenizer("wordpiece"),
                output=tmp_path / "o",
                progress=False,
                format="bert",
            )
        )
    assert not (tmp_path / "o").exists()


def test_nsp_and_none_tasks(tiny):
    nsp = PretrainingDataset(_wiki_prepared(tiny, "wiki_nsp", inter_sentence_task="nsp"))
    meta = nsp.meta
    other = meta[:, M["b_doc"]] != meta[:, M["doc"]]
    assert np.array_equal(other, meta[:, M["label"]] == 1)
    assert abs(other.mean() - 0.5) < 0.05
    none = PretrainingDataset(_wiki_prepared(tiny, "wiki_none", inter_sentence_task="none"))
    assert (none.meta[:, M["label"]] == 0).all()
    assert (none.meta[:, M["a_orig_end"]] == none.meta[:, M["b_orig_start"]]).all()


# ---------------------------------------------------------------------------------------------- determinism
def test_same_seed_same_bytes_any_workers(tmp_path, tiny):
    corpus = [str(tiny.wikitext_subset(20))]
    tok = str(tiny.tokenizer("sentencepiece"))
    digests = []
    for name, workers, seed in (("a", 1, 5), ("b", 2, 5), ("c", 1, 6)):
        prepare(
            PrepareConfig(
                corpus=corpus,
                tokenizer=tok,
                output=tmp_path / name,
                workers=workers,
                seed=seed,
                progress=False,
                shard_size=300,
            )
        )
        digests.append(_files_digest(tmp_path / name))
    assert digests[0] == digests[1]
    assert digests[0] != digests[2]
    assert len([k for k in digests[0] if k.endswith(".input_ids.npy")]) > 1  # several shards
    verify_checksums(tmp_path / "a")


def test_manifest_contents(tiny):
    out = _wiki_prepared(tiny)
    man = read_manifest(out)
    assert man["format"] == "litebert-pretraining-data" and man["version"] == 1
    t = man["tokenizer"]
    assert t["vocab_size"] == 3000 and t["mask_token_id"] == 4 and t["kind"] == "sentencepiece"
    s = man["settings"]
    assert s["max_seq_length"] == 128 and s["masking"] == "dynamic" and s["max_ngram"] == 3
    assert s["inter_sentence_task"] == "sop" and s["seed"] == 12345
    for key in ("documents", "sentences", "instances", "tokens"):
        assert man["counts"][key] > 0
    assert (out / "tokenizer" / "spiece.model").is_file() and (out / "tokenizer" / "tokenizer.json").is_file()
    for shard in man["shards"]:
        for f in shard["files"].values():
            assert hashlib.sha256((out / f["path"]).read_bytes()).hexdigest() == f["sha256"]


# ---------------------------------------------------------------------------------------- dataset + masking
def test_dynamic_masking_on_real_data(tiny):
    ds = PretrainingDataset(_wiki_prepared(tiny))
    tok = load_tokenizer(ds.path / "tokenizer")
    pieces = tok.convert_ids_to_tokens(list(range(tok.vocab_size)))
    idx = list(range(0, len(ds), 3))
    items = ds.__getitems__(idx)
    assert all(torch.equal(a["labels"], b["labels"]) for a, b in zip(items[:20], [ds[i] for i in idx[:20]]))
    n_exact = 0
    for i, it in zip(idx, items):
        raw = ds.raw(i)
        lab = it["labels"].numpy()
        sel = lab != -100
        n = len(lab)
        expected = min(20, max(1, round(n * 0.15)))
        assert sel.sum() <= expected
        n_exact += sel.sum() == expected
        assert np.array_equal(lab[sel], raw["input_ids"][sel])  # labels are the original ids
        assert not np.isin(raw["input_ids"][sel], [tok.cls_token_id, tok.sep_token_id, tok.pad_token_id]).any()
        # SentencePiece non-start pieces are masked only with their word
        for p in np.nonzero(sel)[0]:
            if p > 1 and not raw["word_start"][p]:
                assert sel[p - 1], (i, p, pieces[raw["input_ids"][p]])
    assert n_exact / len(idx) > 0.9
    # epochs: same epoch same masks, other epoch other masks
    a = ds[7]["labels"]
    ds.set_epoch(1)
    b = ds[7]["labels"]
    ds.set_epoch(0)
    assert torch.equal(a, ds[7]["labels"]) and not torch.equal(a, b)
    assert torch.equal(PretrainingDataset(ds.path, epoch=1)[7]["labels"], b)


def test_collator_pads_to_longest(tiny):
    ds = PretrainingDataset(_wiki_prepared(tiny))
    short = int(np.argmin(ds.lengths))
    items = [ds[short], ds[0]]
    batch = ds.collator()(items)
    S = max(len(it["input_ids"]) for it in items)
    assert batch["input_ids"].shape == (2, S)
    n = len(items[0]["input_ids"])
    if n < S:
        assert (batch["input_ids"][0, n:] == ds.pad_token_id).all()
        assert (batch["labels"][0, n:] == -100).all() and (batch["attention_mask"][0, n:] == 0).all()
        assert (batch["token_type_ids"][0, n:] == 0).all()
    assert batch["sentence_order_label"].shape == (2,)
    assert PretrainingCollator(0, pad_to_multiple_of=64)(items)["input_ids"].shape[1] % 64 == 0
    loader = torch.utils.data.DataLoader(
        ds, batch_size=16, shuffle=True, collate_fn=ds.collator(), generator=torch.Generator().manual_seed(0)
    )
    b = next(iter(loader))
    assert b["input_ids"].shape[0] == 16 and b["labels"].ne(-100).any()


def test_static_masking_with_dupe_factor(tiny):
    corpus = (str(tiny.wikitext_subset(20)),)
    tok = str(tiny.tokenizer("wordpiece"))
    dyn = PretrainingDataset(tiny.prepared("wp_dyn", corpus, tok))
    st = PretrainingDataset(tiny.prepared("wp_static", corpus, tok, static_masking=True, dupe_factor=2))
    assert st.static and len(st) > 1.5 * len(dyn)
    a = st[3]["labels"]
    st.set_epoch(4)
    assert torch.equal(a, st[3]["labels"])
    tokz = load_tokenizer(st.path / "tokenizer")
    sel = a != -100
    assert sel.any()
    masked_share = (st[3]["input_ids"][sel] == tokz.mask_token_id).float().mean()
    assert masked_share > 0.4
    pieces = tokz.convert_ids_to_tokens(list(range(tokz.vocab_size)))
    for i in range(0, len(st), 7):  # WordPiece continuations only with their word
        it = st[i]
        lab, ids = it["labels"].numpy(), it["input_ids"].numpy()
        for p in np.nonzero(lab != -100)[0]:
            # a segment may begin with a continuation (truncated at the front): then it is a word of its own
            if pieces[lab[p]].startswith("##") and ids[p - 1] not in (tokz.cls_token_id, tokz.sep_token_id):
                assert lab[p - 1] != -100


def test_chinese_whole_word_masking(tiny):
    out = tiny.prepared(
        "zh_wwm",
        (str(tiny.news_zh()), str(tiny.clue_subset(300))),
        str(tiny.tokenizer("chinese", 4000)),
        whole_word_mask_zh=True,
        max_seq_length=128,
    )
    ds = PretrainingDataset(out)
    tok = load_tokenizer(out / "tokenizer")
    pieces = tok.convert_ids_to_tokens(list(range(tok.vocab_size)))
    multi_char_words = 0
    for i in range(0, len(ds), 5):
        it, raw = ds[i], ds.raw(i)
        lab = it["labels"].numpy()
        sel = lab != -100
        assert not any(
            pieces[t].startswith("##") and len(pieces[t]) == 3 and "\u4e00" <= pieces[t][2] <= "\u9fff"
            for t in lab[sel]
        )  # labels are original character ids, never a ## form
        ws = raw["word_start"]
        for p in np.nonzero(sel)[0]:
            if not ws[p] and p > 0 and raw["input_ids"][p - 1] not in (tok.cls_token_id, tok.sep_token_id):
                assert sel[p - 1]  # a character inside a jieba word is masked only with its word
        inside = (ws == 0) & ~np.isin(raw["input_ids"], [tok.sep_token_id, tok.cls_token_id])
        multi_char_words += int(inside.sum())
    assert multi_char_words > 100  # jieba grouped characters into words


# ------------------------------------------------------------------------------------------- model check
def test_check_data_matches_model(tiny):
    man = read_manifest(_wiki_prepared(tiny))
    check_data_matches_model(man, {"vocab_size": 3000, "max_position_embeddings": 512})
    with pytest.raises(LitebertError, match="vocab_size"):
        check_data_matches_model(man, {"vocab_size": 30000, "max_position_embeddings": 512})
    with pytest.raises(LitebertError, match="max_position_embeddings=64"):
        check_data_matches_model(man, {"vocab_size": 3000, "max_position_embeddings": 64})
    with pytest.raises(LitebertError, match="max_seq_length"):
        check_data_matches_model(man, {"vocab_size": 3000, "max_position_embeddings": 512}, max_seq_length=64)


# ------------------------------------------------------------------------------------------------ bad input
def test_bad_input(tmp_path, tiny):
    tok = str(tiny.tokenizer("wordpiece"))
    good = tmp_path / "good.txt"
    good.write_text("One sentence here.\nAnother one here.\n\nDoc two is here.\nWith a second line.\n")
    with pytest.raises(LitebertError, match="not found"):
        prepare(PrepareConfig(corpus=[tmp_path / "missing.txt"], tokenizer=tok, output=tmp_path / "o", progress=False))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(LitebertError, match="empty"):
        prepare(PrepareConfig(corpus=[tmp_path / "empty.txt"], tokenizer=tok, output=tmp_path / "o", progress=False))
    with pytest.raises(LitebertError, match="max_position_embeddings"):
        PrepareConfig(corpus=[good], tokenizer=tok, output=tmp_path / "o", max_seq_length=1024)
    (tmp_path / "tokdir").mkdir()
    with pytest.raises(LitebertError, match=r"none of spiece\.model"):
        prepare(PrepareConfig(corpus=[good], tokenizer=tmp_path / "tokdir", output=tmp_path / "o", progress=False))
    with pytest.raises(LitebertError, match="dupe-factor"):
        PrepareConfig(corpus=[good], tokenizer=tok, output=tmp_path / "o", dupe_factor=3)
    # invalid UTF-8: skipped and counted in the summary
    bad = tmp_path / "bad.txt"
    bad.write_bytes(good.read_bytes() + b"\nbroken \xff line\nand more text here.\n")
    res = prepare(PrepareConfig(corpus=[bad], tokenizer=tok, output=tmp_path / "o", progress=False, format="bert"))
    assert res.skipped_lines == 1 and f"{bad}:7" in res.summary
    with pytest.raises(LitebertError, match=r"earlier `litebert prepare` output \(manifest\.json\): pass --overwrite"):
        prepare(PrepareConfig(corpus=[good], tokenizer=tok, output=tmp_path / "o", progress=False))
    prepare(PrepareConfig(corpus=[good], tokenizer=tok, output=tmp_path / "o", progress=False, overwrite=True))
    with pytest.raises(LitebertError, match=r"manifest\.json"):
        PretrainingDataset(tmp_path)
    # a truncated shard file: a LitebertError naming it, not numpy's ValueError
    shard = tmp_path / "o" / "shard-00000.input_ids.npy"
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(LitebertError, match=r"shard-00000\.input_ids\.npy: damaged data file"):
        PretrainingDataset(tmp_path / "o")
    # an output that is a file is refused even with overwrite (it could be the corpus)
    with pytest.raises(LitebertError, match="is a file, not a directory"):
        prepare(PrepareConfig(corpus=[good], tokenizer=tok, output=bad, progress=False, overwrite=True))
    assert bad.is_file() and not list(tmp_path.glob(".bad.txt*"))
    # every line skipped (text forced to be read as JSON lines): the error says so, not "single sentence"
    with pytest.raises(LitebertError, match=rf"gave no document; 4 line\(s\) were skipped .*{good}:1"):
        prepare(PrepareConfig(corpus=[good], tokenizer=tok, output=tmp_path / "o2", progress=False, format="jsonl"))
    assert not (tmp_path / "o2").exists()


def test_empty_files_in_a_corpus_directory_are_skipped_with_a_note(tmp_path, tiny):
    """An empty file in a directory holds no document: prepare goes on and names it; a directory whose files are
    all empty, or a corpus whose only file gives no document (a Parquet file of null rows), is the no-document error
    naming the files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tok = str(tiny.tokenizer("wordpiece"))
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "a.txt").write_text("")
    (d / "b.txt").write_text("One sentence here.\nAnother one here.\n\nDoc two is here.\nWith a second line.\n")
    res = prepare(PrepareConfig(corpus=[d], tokenizer=tok, output=tmp_path / "o", progress=False))
    assert res.documents == 2 and res.instances > 0
    assert res.summary.endswith(f"; skipped 1 empty file: {d / 'a.txt'}")
    assert [(e["source"], e["documents"]) for e in res.manifest["corpus"]] == [
        (str(d / "a.txt"), 0),
        (str(d / "b.txt"), 2),
    ]

    (d / "b.txt").write_text("\n\n")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), d / "c.parquet")
    with pytest.raises(LitebertError) as err:
        prepare(PrepareConfig(corpus=[d], tokenizer=tok, output=tmp_path / "o2", progress=False))
    names = ", ".join(str(d / n) for n in ("a.txt", "b.txt", "c.parquet"))
    assert str(err.value) == f"no instances were made: the corpus ({names}) gave no document: every file is empty"
    assert not (tmp_path / "o2").exists()

    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": pa.array([None, None], pa.string())}), nulls)
    with pytest.raises(
        LitebertError, match=rf"^no instances were made: {re.escape(str(nulls))} gave no document; 2 line"
    ):
        prepare(PrepareConfig(corpus=[nulls], tokenizer=tok, output=tmp_path / "o3", progress=False))


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_overwrite_never_deletes_inputs_or_foreign_directories(tmp_path, tiny):
    """--overwrite replaces only an earlier prepare output; an --output that is, contains or is inside an input, or
    any other non-empty directory, is refused with nothing deleted."""
    tok = tmp_path / "tok"
    _copy_tree(Path(tiny.tokenizer("wordpiece")), tok)
    cdir = tmp_path / "corpus"
    cdir.mkdir()
    (cdir / "a.txt").write_text("One sentence here.\nAnother one here.\n\nDoc two is here.\nWith a second line.\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_settings.json").write_text('{"command": "finetune"}')
    (run / "eval_results.json").write_text("{}")
    before = {d: _tree(d) for d in (cdir, tok, run)}

    def attempt(output, corpus=cdir):
        return prepare(
            PrepareConfig(corpus=[corpus], tokenizer=tok, output=output, progress=False, overwrite=True, format="bert")
        )

    cases = [
        (cdir, rf"--output {cdir} is the --corpus {cdir}"),
        (tok, rf"--output {tok} is the --tokenizer {tok}"),
        (cdir / "sub", rf"--output {cdir / 'sub'} is inside the --corpus {cdir}"),
        (tok / "data", "is inside the --tokenizer"),
        (
            run,
            r"is not empty \(holds eval_results\.json, run_settings\.json\) and is not an earlier `litebert prepare`",
        ),
    ]
    for output, msg in cases:
        with pytest.raises(LitebertError, match=msg):
            attempt(output)
    with pytest.raises(LitebertError, match=rf"--output {tmp_path} contains the --corpus {cdir / 'a.txt'}"):
        attempt(tmp_path, corpus=cdir / "a.txt")
    assert {d: _tree(d) for d in (cdir, tok, run)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "run", "tok"]
    # an earlier prepare output is replaced with --overwrite
    res = attempt(tmp_path / "data")
    assert res.instances > 0
    (tmp_path / "data" / "stale.txt").write_text("x")
    res2 = attempt(tmp_path / "data")
    assert res2.instances == res.instances and not (tmp_path / "data" / "stale.txt").exists()


def _copy_tree(src: Path, dst: Path) -> None:
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())


def test_nsp_on_one_document_warns(tmp_path, tiny, capsys):
    corpus = tmp_path / "one.txt"
    corpus.write_text("".join(f"Sentence number {i} is about word{i}.\n" for i in range(40)))
    tok = tiny.tokenizer("wordpiece")
    cfg = dict(corpus=[corpus], tokenizer=tok, progress=False, format="bert", inter_sentence_task="nsp")
    res = prepare(PrepareConfig(output=tmp_path / "o", **cfg))
    assert (PretrainingDataset(tmp_path / "o").meta[:, M["label"]] == 0).all() and res.instances > 0
    assert res.summary.endswith(
        "; warning: --inter-sentence-task nsp needs at least two documents for its negatives (random next segments); "
        f"the corpus has 1, so all {res.instances} instances have label 0"
    )
    corpus.write_text(corpus.read_text() + "\nA second document.\nWith two sentences.\n")
    assert "warning" not in prepare(PrepareConfig(output=tmp_path / "o2", **cfg)).summary


def test_a_tokenizer_that_does_not_cover_the_corpus_is_warned_about_and_counted(tmp_path, tiny):
    """An English WordPiece tokenizer on Chinese news: before, shards of ~95 % [UNK] were written without a word."""
    tok_dir = tiny.tokenizer("wordpiece")
    tok = load_tokenizer(tok_dir)
    zh = tmp_path / "zh.txt"
    zh.write_text("\n\n".join(tiny.news_zh().read_text(encoding="utf-8").split("\n\n")[:3]) + "\n", encoding="utf-8")
    res = prepare(PrepareConfig(corpus=[zh], tokenizer=tok_dir, output=tmp_path / "zh", progress=False))
    counts = read_manifest(tmp_path / "zh")["counts"]
    # the oracle: the corpus's own token stream, counted here
    ids = np.concatenate([d for d in _doc_tokens(zh, tok) if len(d)])
    assert counts["corpus_tokens"] == len(ids)
    assert counts["unknown_tokens"] == int((ids == tok.unk_token_id).sum())
    share = counts["unknown_tokens"] / counts["corpus_tokens"]
    assert share > 0.5
    assert res.summary.endswith(
        f"; warning: {share:.1%} of the corpus tokens ({counts['unknown_tokens']} of {counts['corpus_tokens']}) are "
        "the unknown token '[UNK]': the tokenizer does not cover this corpus (another language or script?); train "
        "one on it with litebert train-tokenizer"
    )
    en = prepare(
        PrepareConfig(corpus=[tiny.wikitext_subset(60)], tokenizer=tok_dir, output=tmp_path / "en", progress=False)
    )
    assert "warning" not in en.summary
    assert (
        read_manifest(tmp_path / "en")["counts"]["unknown_tokens"]
        < 0.05 * read_manifest(tmp_path / "en")["counts"]["corpus_tokens"]
    )


def test_cli(tmp_path, tiny, capsys):
    corpus = str(tiny.wikitext_subset(5))
    assert (
        main(
            [
                "train-tokenizer",
                "--corpus",
                corpus,
                "--kind",
                "wordpiece",
                "--vocab-size",
                "500",
                "--output",
                str(tmp_path / "tok"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "prepare",
                "--corpus",
                corpus,
                "--tokenizer",
                str(tmp_path / "tok"),
                "--output",
                str(tmp_path / "data"),
                "--max-seq-length",
                "64",
                "--workers",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "documents" in out and "instances" in out and "MB/s" in out
    assert json.loads((tmp_path / "data" / "manifest.json").read_text())["settings"]["max_seq_length"] == 64
    rc = main(
        [
            "prepare",
            "--corpus",
            str(tmp_path / "nope.txt"),
            "--tokenizer",
            str(tmp_path / "tok"),
            "--output",
            str(tmp_path / "d2"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error:") and "not found" in err and "Traceback" not in err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok line\n\xff\xfe\n")
    rc = main(
        [
            "prepare",
            "--corpus",
            str(bad),
            "--tokenizer",
            str(tmp_path / "tok"),
            "--output",
            str(tmp_path / "d3"),
            "--on-invalid-utf8",
            "error",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and f"{bad}:2" in err
    rc = main(
        [
            "prepare",
            "--corpus",
            corpus,
            "--tokenizer",
            str(tmp_path / "tok"),
            "--output",
            str(tmp_path / "d4"),
            "--max-seq-length",
            "600",
        ]
    )
    assert rc == 2 and "max_position_embeddings" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- resume
REPO = Path(__file__).resolve().parents[1]
SUB_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
KILL_HOOK = "LITEBERT_TEST_PREPARE_KILL_AT_SHARD"


def _prepare_args(corpus, tok, out, *extra):
    return ["prepare", "--corpus", str(corpus), "--tokenizer", str(tok), "--output", str(out), "--no-progress", *extra]


def _sub(args, env=None, **kw):
    # a session of its own: a kill takes prepare and its workers, as a scheduler kills a job
    cmd = [sys.executable, "-m", "litebert", *args]
    return subprocess.run(
        cmd, env={**SUB_ENV, **(env or {})}, cwd=REPO, capture_output=True, text=True, start_new_session=True, **kw
    )


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_then_the_same_command_ends_with_the_same_bytes(tmp_path, tiny, workers):
    corpus, tok = tiny.wikitext_subset(20), tiny.tokenizer("sentencepiece")
    extra = ["--shard-size", "100", "--workers", str(workers)]
    ref = tmp_path / "ref"
    prepare(PrepareConfig(corpus=[str(corpus)], tokenizer=str(tok), output=ref, progress=False, shard_size=100))
    want = _files_digest(ref)
    assert len([k for k in want if k.endswith(".input_ids.npy")]) >= 5

    # killed after shard-00002's files were written, before its progress record
    out = tmp_path / "out"
    killed = _sub(_prepare_args(corpus, tok, out, *extra), env={KILL_HOOK: "3"}, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    partial = tmp_path / ".out.partial"
    assert not out.exists() and _leftovers(out) == [".out.partial"]
    record = json.loads((partial / "progress.json").read_text())
    assert [s["name"] for s in record["shards"]] == ["shard-00000", "shard-00001"]
    assert (partial / "shard-00002.input_ids.npy").is_file()  # written, not recorded: done again

    again = _sub(_prepare_args(corpus, tok, out, *extra), timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "continued an interrupted run from shard 2" in again.stdout
    assert _files_digest(out) == want and _leftovers(out) == []
    assert read_manifest(out)["shards"] == read_manifest(ref)["shards"]  # the checksums too
    verify_checksums(out)


def test_sigkill_at_any_moment_resumes(tmp_path, tiny):
    """A kill from outside (as a scheduler's) while shards are being written, with 2 workers."""
    corpus, tok = tiny.wikitext_subset(120), tiny.tokenizer("sentencepiece")
    ref, out = tmp_path / "ref", tmp_path / "out"
    cfg = dict(tokenizer=str(tok), progress=False, shard_size=100)
    prepare(PrepareConfig(corpus=[str(corpus)], output=ref, **cfg))
    cmd = [sys.executable, "-m", "litebert", *_prepare_args(corpus, tok, out, "--shard-size", "100", "--workers", "2")]
    proc = subprocess.Popen(cmd, env=SUB_ENV, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL)
    progress, shards, deadline = tmp_path / ".out.partial" / "progress.json", 0, time.monotonic() + 120
    while proc.poll() is None and shards < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
        with contextlib.suppress(OSError, ValueError):
            shards = len(json.loads(progress.read_text())["shards"])
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL and shards >= 3, "prepare ended before it could be killed"
    again = _sub(_prepare_args(corpus, tok, out, "--shard-size", "100"), timeout=300)
    assert again.returncode == 0 and "continued an interrupted run" in again.stdout, again.stderr[-2000:]
    assert _files_digest(out) == _files_digest(ref) and _leftovers(out) == []


def test_resume_refuses_other_settings_one_writer_at_a_time_and_stale_temporaries_go(tmp_path, tiny):
    corpus, tok = tiny.wikitext_subset(20), tiny.tokenizer("sentencepiece")
    out = tmp_path / "out"
    killed = _sub(_prepare_args(corpus, tok, out, "--shard-size", "100"), env={KILL_HOOK: "2"}, timeout=300)
    assert killed.returncode == -signal.SIGKILL
    cfg = dict(corpus=[str(corpus)], tokenizer=str(tok), output=out, progress=False, shard_size=100)
    with pytest.raises(LitebertError, match=r"holds an unfinished prepare of out .*settings\.seed: 12345 there, 7 now"):
        prepare(PrepareConfig(**cfg, seed=7))
    with open(tmp_path / ".out.partial" / ".lock") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(LitebertError, match=r"another `litebert prepare` is writing .*out"):
            prepare(PrepareConfig(**cfg))
    assert (tmp_path / ".out.partial" / "progress.json").is_file()  # neither refusal touched it
    res = prepare(PrepareConfig(**cfg, seed=7, overwrite=True))  # --overwrite discards the other run's part
    assert read_manifest(out)["settings"]["seed"] == 7 and "continued" not in res.summary

    # a killed run of an earlier litebert left .OUTPUT.tmp-PID: removed once its process is gone
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".out2.tmp-{dead.pid}"
    (stale / "x").mkdir(parents=True)
    prepare(PrepareConfig(**{**cfg, "output": tmp_path / "out2"}))
    assert not stale.exists() and _leftovers(tmp_path / "out2") == []


# ---------------------------------------------------------------------------------------------------- memory
def _compound_corpus(docs: list[list[str]], copies: int, path: Path) -> Path:
    """``copies`` copies of ``docs`` (BERT format) where each word w becomes w + v, v a word drawn at random for
    each occurrence: nearly every word is new, the worst case for anything that remembers words."""
    words = np.array(sorted({w for d in docs for s in d for w in s.split()}))
    rng = np.random.default_rng(0)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(copies):
            for d in docs:
                sents = [s.split() for s in d]
                partners = iter(words[rng.integers(0, len(words), sum(map(len, sents)))].tolist())
                f.write("\n".join(" ".join(w + next(partners) for w in s) for s in sents) + "\n\n")
    return path


def _peak_rss_kb(args) -> int:
    """Peak RSS (kB) of ``litebert ARGS`` in a new process: its VmHWM. Not ru_maxrss, which Linux carries over
    exec from the forking process (pytest's own few hundred MB)."""
    code = (
        "import re, sys; from litebert.cli import main; rc = main(sys.argv[1:]); "
        "print('peak', re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read())[1]); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], env=SUB_ENV, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split("peak")[-1])


def test_peak_memory_does_not_grow_with_the_corpus(tmp_path, tiny):
    """prepare over 10x the text with 10x the distinct words: peak RSS within 45 MB of the small run's ~320 MB (the
    word cache is capped at 65k words, ~16 MB; the tokenizers library's native heap warms up by ~20 MB and then
    stays flat). The unbounded word cache added 110 MB here, and ~200 MB per million distinct words."""
    if not Path("/proc/self/status").is_file():
        pytest.skip("needs Linux's /proc/self/status (VmHWM)")
    docs = list(read_documents(tiny.wikitext_subset(20)))
    small = _compound_corpus(docs, 1, tmp_path / "small.txt")
    large = _compound_corpus(docs, 10, tmp_path / "large.txt")
    assert large.stat().st_size > 9 * small.stat().st_size
    tok = tiny.tokenizer("sentencepiece")
    rss = [_peak_rss_kb(_prepare_args(c, tok, tmp_path / c.stem, "--shard-size", "500")) for c in (small, large)]
    assert rss[1] - rss[0] < 45_000, f"peak RSS {rss[0]} kB over {small.stat().st_size} B, {rss[1]} kB over 10x"
