"""``prepare --num-partitions N --partition I`` and ``litebert merge-data``: the N parts together hold exactly the
instances of a one-machine run (compared as multisets of everything stored per instance), whatever the worker
count; merge refuses parts that do not belong together or are incomplete; ``pretrain`` trains on a merged
directory."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from litebert.cli import main
from litebert.data import PrepareConfig, PretrainingDataset, prepare, read_documents, read_manifest
from litebert.data.merge import merge_data
from litebert.errors import LitebertError


@pytest.fixture(scope="module")
def short_docs(tiny, tmp_path_factory) -> Path:
    """60 WikiText-2 articles cut into documents of 6 sentences (BERT format): ~1 MB in ~20 units of 64 documents,
    so that partitions interleave many units."""
    out = tmp_path_factory.mktemp("merge") / "short_docs.txt"
    docs = []
    for doc in read_documents(tiny.wikitext_subset(60)):
        docs += ["\n".join(doc[i : i + 6]) for i in range(0, len(doc), 6)]
    out.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return out


def _run(corpus, tok, out, **kw) -> Path:
    prepare(PrepareConfig(corpus=[str(corpus)], tokenizer=str(tok), output=out, progress=False, **kw))
    return out


def _instances(path) -> Counter:
    """Everything stored per instance (ids, word starts, static labels, meta: document, positions, SOP label,
    len_a, hence token_type_ids), as a multiset."""
    ds = PretrainingDataset(path)
    out = Counter()
    for i in range(len(ds)):
        r = ds.raw(i)
        out[tuple(tuple(np.asarray(v).ravel().tolist()) for _, v in sorted(r.items()))] += 1
    return out


@pytest.mark.parametrize(
    "kw",
    [
        {"shard_size": 400},
        {"static_masking": True, "dupe_factor": 2, "inter_sentence_task": "nsp", "shard_size": 900},
    ],
    ids=["dynamic-sop", "static-nsp-2passes"],
)
def test_parts_union_is_the_one_machine_run(tmp_path, tiny, short_docs, kw):
    tok = tiny.tokenizer("sentencepiece")
    single = _run(short_docs, tok, tmp_path / "single", **kw)
    n = 3
    parts = [
        _run(short_docs, tok, tmp_path / f"part{i}", num_partitions=n, partition=i, workers=2 if i == 1 else 1, **kw)
        for i in range(n)
    ]
    want = _instances(single)
    got = [_instances(p) for p in parts]
    assert all(len(g) for g in got)
    assert sum(got, Counter()) == want  # disjoint parts whose union is the one-machine run
    assert sum(sum(g.values()) for g in got) == sum(want.values())

    res = merge_data(parts, tmp_path / "merged")
    merged = read_manifest(tmp_path / "merged")
    one = read_manifest(single)
    assert merged["counts"] == one["counts"] and merged["settings"] == one["settings"]
    assert merged["tokenizer"] == one["tokenizer"] and "partition" not in merged
    assert [m["partition"] for m in merged["merged_from"]] == [0, 1, 2]
    assert res.instances == one["counts"]["instances"] and res.shards == sum(
        len(read_manifest(p)["shards"]) for p in parts
    )
    assert _instances(tmp_path / "merged") == want
    # shards are linked, not rewritten: the same inode as the part's file
    first = merged["shards"][0]["files"]["input_ids"]["path"]
    assert os.path.samefile(tmp_path / "merged" / first, parts[0] / "shard-00000.input_ids.npy")
    assert res.linked > 0 and res.copied == 0


def test_partition_is_the_same_for_any_worker_count(tmp_path, tiny, short_docs):
    tok = tiny.tokenizer("sentencepiece")
    a = _run(short_docs, tok, tmp_path / "a", num_partitions=4, partition=2, shard_size=300)
    b = _run(short_docs, tok, tmp_path / "b", num_partitions=4, partition=2, shard_size=300, workers=2)
    files = sorted(p.name for p in a.iterdir() if p.is_file())
    assert files == sorted(p.name for p in b.iterdir() if p.is_file()) and len(files) > 4
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert read_manifest(a)["partition"] == {"index": 2, "count": 4}


def test_merge_refuses_parts_that_do_not_belong_together(tmp_path, tiny, short_docs, capsys):
    tok = tiny.tokenizer("sentencepiece")
    kw = {"num_partitions": 3, "shard_size": 2000}
    parts = [_run(short_docs, tok, tmp_path / f"p{i}", partition=i, **kw) for i in range(3)]
    with pytest.raises(LitebertError, match=r"partition 1 of 0\.\.2 is missing \(2 of 3 given\)"):
        merge_data([parts[0], parts[2]], tmp_path / "m")
    with pytest.raises(LitebertError, match=r"a partition is given twice \(partition 2: .*p2, .*p2\)"):
        merge_data([*parts, parts[2]], tmp_path / "m")
    other_seed = _run(short_docs, tok, tmp_path / "s1", partition=1, seed=7, **kw)
    with pytest.raises(LitebertError, match=r"s1 and .*p0 were not prepared alike \(settings\.seed: 7 vs 12345\)"):
        merge_data([parts[0], other_seed, parts[2]], tmp_path / "m")
    other_tok = _run(short_docs, tiny.tokenizer("sentencepiece", vocab_size=2000), tmp_path / "t1", partition=1, **kw)
    with pytest.raises(LitebertError, match=r"t1 and .*p0 were not prepared alike \(tokenizer\."):
        merge_data([parts[0], other_tok, parts[2]], tmp_path / "m")
    four = _run(short_docs, tok, tmp_path / "q3", num_partitions=4, partition=3, shard_size=2000)
    with pytest.raises(LitebertError, match=r"different --num-partitions"):
        merge_data([*parts, four], tmp_path / "m")
    assert not (tmp_path / "m").exists()

    # --check verifies checksums and writes nothing; a damaged shard is named
    assert main(["merge-data", *map(str, parts), "--check"]) == 0
    assert "3 partition(s) complete and consistent" in capsys.readouterr().out
    shard = parts[1] / "shard-00000.meta.npy"
    shard.write_bytes(shard.read_bytes()[:-8] + b"\0" * 8)
    assert main(["merge-data", *map(str, parts), "--output", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert f"{shard}: sha256 differs" in err and not (tmp_path / "m").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".m")]


def test_pretrain_reads_a_merged_directory(tmp_path, tiny, short_docs, capsys):
    tok = tiny.tokenizer("sentencepiece")
    parts = [
        _run(short_docs, tok, tmp_path / f"p{i}", num_partitions=2, partition=i, max_seq_length=64, shard_size=500)
        for i in range(2)
    ]
    # a part alone is refused (before: it trained on half the corpus without a word); merge-data needs --output
    args = ["pretrain", "--data", str(parts[0]), "--model-config", "albert-debug", "--output", str(tmp_path / "r0")]
    assert main([*args, "--max-steps", "1"]) == 2
    assert capsys.readouterr().err == (
        f"error: --data {parts[0]} is partition 0 of 2 of a prepared corpus: merge the parts first (litebert "
        "merge-data PART_DIR ... --output DIR) and pass the merged directory\n"
    )
    assert not (tmp_path / "r0").exists()
    assert main(["merge-data", *map(str, parts)]) == 2  # before: a TypeError traceback
    assert capsys.readouterr().err == (
        "error: merge-data: give --output DIR for the merged data (or --check to verify the parts only)\n"
    )
    assert main(["merge-data", *map(str, parts), "--output", str(tmp_path / "data")]) == 0
    assert "merged 2 partition(s)" in capsys.readouterr().out
    for p in parts:  # the merged directory stands alone
        for f in p.iterdir():
            if f.is_file():
                f.unlink()
    args = ["pretrain", "--data", str(tmp_path / "data"), "--model-config", "albert-debug", "--output"]
    args += [str(tmp_path / "run"), "--max-steps", "3", "--batch-size", "8", "--no-progress-bar"]
    assert main([*args, "--logging-steps", "1"]) == 0
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()
    assert "pretrain train step 3/3" in capsys.readouterr().out


def test_partition_auto_reads_torchrun_rank(monkeypatch):
    kw = dict(corpus=["c.txt"], tokenizer="tok", output="out")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    cfg = PrepareConfig(**kw, partition="auto")
    assert (cfg.partition, cfg.num_partitions) == (3, 4)
    with pytest.raises(LitebertError, match=r"WORLD_SIZE is 4 but --num-partitions is 8"):
        PrepareConfig(**kw, partition="auto", num_partitions=8)
    with pytest.raises(LitebertError, match=r"--partition 4: must be in 0\.\.3 \(--num-partitions 4\)"):
        PrepareConfig(**kw, partition=4, num_partitions=4)
    assert PrepareConfig(**kw, partition="2", num_partitions=4).partition == 2
    monkeypatch.delenv("RANK")
    with pytest.raises(LitebertError, match=r"--partition auto: RANK and WORLD_SIZE are not set"):
        PrepareConfig(**kw, partition="auto")


def test_num_partitions_without_partition_is_refused(capsys):
    """Every machine of a cluster given --num-partitions N but no --partition wrote part 0 (the default), found only
    at merge-data, after the work: a part must be named (a one-machine run still needs neither)."""
    kw = dict(corpus=["c.txt"], tokenizer="tok", output="out")
    with pytest.raises(
        LitebertError, match=r"--partition: give the part this run writes, 0\.\.3 of --num-partitions 4"
    ):
        PrepareConfig(**kw, num_partitions=4)
    assert PrepareConfig(**kw).partition == 0 and PrepareConfig(**kw, partition=0, num_partitions=4).partition == 0
    assert main(["prepare", "--corpus", "c.txt", "--tokenizer", "tok", "--output", "out", "--num-partitions", "2"]) == 2
    assert "--partition: give the part this run writes, 0..1" in capsys.readouterr().err
