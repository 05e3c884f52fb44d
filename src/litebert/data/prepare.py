"""``litebert prepare``: corpus → tokenized documents → SOP instances → (static masks) → shards + manifest.

Pipeline (pure, seeded stages with inspectable artifacts):

1. :func:`litebert.corpus.read_documents` streams documents (lists of sentences) from the files.
2. Documents are grouped into *units* (64 documents or 512 KiB of text, whichever first; the grouping depends only
   on the corpus), numbered over all passes. Each unit is tokenized and turned into instances
   (:mod:`litebert.data.instances`) by a worker; each document uses a generator seeded by ``(seed, pass,
   doc_index)``, so results do not depend on ``--workers``. Partition I of ``num_partitions`` N takes the units
   numbered I modulo N: the N parts hold exactly the instances of one run (join them with :mod:`.merge`).
3. Results come back in unit order and are written into shards of ``shard_size`` instances; at most
   ``2 × workers`` units are in flight, so memory is bounded by a shard plus a few units, not by the corpus. After
   each shard a progress record (the unit and instance to continue from) lets a killed run continue
   (:func:`partial_directory`).
4. ``manifest.json`` records the format, tokenizer, every setting, counts and sha256 of every file.

With ``static_masking`` the corpus is read ``dupe_factor`` times (pass p), each pass making new instances and
masks (as the official script); masks use keys ``(seed, pass, unit_first_doc << 20 | j)``. Dynamic masking (the
default) stores unmasked instances; :class:`~litebert.data.dataset.PretrainingDataset` masks them per epoch.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import logging
import multiprocessing as mp
import os
import shutil
import signal
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tqdm import tqdm

from litebert.corpus import (
    CORPUS_HELP,
    FORMATS,
    TEXT_COLUMN_HELP,
    CorpusStats,
    check_corpus,
    corpus_bytes,
    empty_files_note,
    expand_document,
    name_list,
    read_documents,
)
from litebert.data.instances import DocumentInstances, InstanceSettings, create_instances_from_document, doc_rng
from litebert.data.masking import mask_batch, mask_keys
from litebert.data.shards import FORMAT_NAME, FORMAT_VERSION, save_npy, write_shard
from litebert.errors import LitebertError
from litebert.fileio import (
    atomic_write_json,
    check_output_target,
    install_directory,
    json_text,
    read_json,
    remove_stale_temporaries,
)
from litebert.hub import HUB_METAVAR, revision_setting
from litebert.settings import check, fail, option_name, setting
from litebert.tokenization import is_cjk_char, load_tokenizer

UNIT_DOCS = 64
UNIT_BYTES = 512 * 1024


@dataclass
class PrepareConfig:
    """Settings of ``litebert prepare`` (docs/algorithms.md §2, §3): the command's options, one field each (derived
    from here).

    Raises :class:`~litebert.errors.LitebertError` ``"--option value: why"`` on construction for a bad value.
    """

    corpus: list[str] = setting(metavar="FILE", help=CORPUS_HELP)
    tokenizer: str = setting(
        metavar=HUB_METAVAR, help="tokenizer directory or Hub id ORG/NAME (see litebert.tokenization.load_tokenizer)"
    )
    output: str = setting(
        metavar="DIR", help="output directory (created; must not exist or be empty unless --overwrite)"
    )
    revision: str | None = revision_setting()  # of a Hub id given as --tokenizer
    max_seq_length: int = setting(
        128,
        ge=5,
        help="tokens per instance including [CLS] and two [SEP] "
        "(at least 5: [CLS] A [SEP] B [SEP]; at most the position table)",
    )
    max_predictions_per_seq: int = setting(20, ge=1, help="P, the most masked tokens per instance")
    masked_lm_prob: float = setting(0.15, ge=0, le=1, help="fraction of tokens to predict")
    max_ngram: int = setting(3, ge=1, help="longest masked n-gram in words (1: plain whole-word masking)")
    short_seq_prob: float = setting(
        0.1, ge=0, le=1, help="probability that a document's target length is drawn from [2, max_seq_length - 3]"
    )
    inter_sentence_task: str = setting(
        "sop",
        choices=("sop", "nsp", "none", "sop-official"),
        help="sop; nsp (B from another nearby document with p 0.5); none (A and B "
        "always in order, label 0: the trainer uses MLM only); sop-official "
        "(SOP as google-research/albert makes it: a one-sentence chunk gets B "
        "from another document, label 1)",
    )
    seed: int = setting(12345, help="seed of every random choice")
    workers: int = setting(1, ge=1, help="processes that tokenize and build instances (output identical for any)")
    static_masking: bool = setting(
        False, help="write masks into the shards (--dupe-factor passes) instead of masking per epoch"
    )
    dupe_factor: int | None = setting(
        None,
        ge=1,
        help="passes over the corpus with --static-masking (default 10 "
        "with it, as BERT's create_pretraining_data.py; 1 without)",
    )
    whole_word_mask_zh: bool = setting(False, help="Chinese whole words from jieba")
    format: str = setting("auto", choices=FORMATS, help="corpus format (auto: detected per file)")
    text_column: str = setting("text", metavar="NAME", help=TEXT_COLUMN_HELP)
    max_position_embeddings: int = setting(
        512, ge=1, help="the model's position table size: --max-seq-length may not exceed it"
    )
    shard_size: int = setting(100_000, ge=1, help="instances per shard (the last one smaller)")
    num_partitions: int = setting(
        1, ge=1, metavar="N", help="split the corpus into N disjoint parts, one per run (join them with merge-data)"
    )
    partition: int | str | None = setting(
        None,
        metavar="I|auto",
        help="the part this run writes, 0..N-1 (required with --num-partitions N > 1); auto: the RANK of torchrun "
        "(and N from WORLD_SIZE when --num-partitions is not given)",
    )
    on_invalid: str = setting(
        "skip",
        option="--on-invalid-utf8",
        choices=("skip", "error"),
        help="lines that are not valid UTF-8: skip (and count) or error",
    )
    overwrite: bool = setting(
        False,
        help="replace an earlier prepare output directory (one with its manifest.json); discard an unfinished run "
        "of other settings instead of continuing it",
    )
    progress: bool = setting(
        True, option="--no-progress", aliases=("--no-progress-bar",), negate=True, help="no progress bar"
    )

    def __post_init__(self) -> None:
        check(self)
        if self.max_seq_length > self.max_position_embeddings:
            fail(
                self,
                "max_seq_length",
                f"is above max_position_embeddings {self.max_position_embeddings}: "
                "the model has no positions beyond that",
            )
        if self.dupe_factor is None:
            self.dupe_factor = 10 if self.static_masking else 1
        if self.dupe_factor > 1 and not self.static_masking:
            fail(self, "dupe_factor", "> 1 needs --static-masking (dynamic masking draws new masks each epoch)")
        if self.partition is None:
            # no default part: N machines each left at part 0 would all write the same part
            if self.num_partitions > 1:
                raise LitebertError(
                    f"{option_name(self, 'partition')}: give the part this run writes, 0..{self.num_partitions - 1} "
                    f"of --num-partitions {self.num_partitions} (auto under torchrun)"
                )
            self.partition = 0
        elif self.partition == "auto":
            self.partition, self.num_partitions = _partition_from_env(self.num_partitions)
        elif isinstance(self.partition, str):
            try:
                self.partition = int(self.partition)
            except ValueError:
                fail(self, "partition", "expected an integer 0..N-1 or auto")
        if not 0 <= self.partition < self.num_partitions:
            fail(self, "partition", f"must be in 0..{self.num_partitions - 1} (--num-partitions {self.num_partitions})")

    def settings(self) -> dict:
        """The settings recorded in the manifest (what determines the bytes; not workers/progress/paths)."""
        d = asdict(self)
        drop = ("workers", "progress", "overwrite", "output", "corpus", "tokenizer", "shard_size", "num_partitions")
        for k in (*drop, "partition"):
            d.pop(k)
        d["masking"] = "static" if self.static_masking else "dynamic"
        d["shard_size"] = self.shard_size
        return d


def _partition_from_env(num_partitions: int) -> tuple[int, int]:
    """``--partition auto``: (RANK, N) of a ``torchrun`` launch; N is WORLD_SIZE unless ``--num-partitions`` says.

    Raises:
        LitebertError: RANK is not set, or WORLD_SIZE disagrees with a ``--num-partitions`` given.
    """
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None or world is None:
        raise LitebertError(
            "--partition auto: RANK and WORLD_SIZE are not set (they are under torchrun); give --partition I "
            "(e.g. --partition $SLURM_ARRAY_TASK_ID in a SLURM array job)"
        )
    world_n = int(world)
    if num_partitions not in (1, world_n):
        raise LitebertError(
            f"--partition auto: WORLD_SIZE is {world_n} but --num-partitions is {num_partitions}; give one or the other"
        )
    return int(rank), world_n


@dataclass
class PrepareResult:
    """What ``prepare`` made: the output directory, counts, throughput and the one-line summary."""

    output: Path
    documents: int
    sentences: int
    instances: int
    tokens: int
    shards: int
    bytes_read: int
    seconds: float
    skipped_lines: int
    dropped_documents: int
    summary: str = ""
    manifest: dict = field(default_factory=dict)

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / max(self.seconds, 1e-9)


# ------------------------------------------------------------------------------------------------------------
# Worker side
# ------------------------------------------------------------------------------------------------------------
_STATE: dict = {}


def _init_worker(tokenizer_dir: str, cfg: PrepareConfig) -> None:
    tok = load_tokenizer(tokenizer_dir)
    _STATE.clear()
    _STATE.update(
        tok=tok,
        cfg=cfg,
        table=tok.word_start_table(),
        settings=InstanceSettings(cfg.max_seq_length, cfg.short_seq_prob, cfg.inter_sentence_task),
        special=np.array(sorted({tok.cls_token_id, tok.sep_token_id, tok.pad_token_id, tok.mask_token_id}), np.int64),
        random_ids=tok.random_replacement_ids(),
        unk=tok.unk_token_id,
    )
    if cfg.whole_word_mask_zh:
        import jieba  # only for Chinese whole-word masking: its import builds a dictionary (~1 s)

        jieba.setLogLevel(logging.ERROR)
        jieba.initialize()
        vocab = tok.get_vocab()
        cjk = np.zeros(len(_STATE["table"]), dtype=bool)
        for t, i in vocab.items():
            core = t[2:] if t.startswith("##") else t
            if len(core) == 1 and is_cjk_char(core):
                cjk[i] = True
        _STATE["cjk"] = cjk


def _tokenize_unit(docs: list[list[str]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Tokenize a unit's documents: per document ``(tokens int32 [T], word_start uint8 [T], sent_lens int64)``,
    sentences that tokenize to nothing removed."""
    tok, table = _STATE["tok"], _STATE["table"]
    docs = [expand_document(d) for d in docs]
    flat = [s for d in docs for s in d]
    if _STATE["cfg"].whole_word_mask_zh:
        import jieba

        encs = tok.backend.encode_batch(flat, add_special_tokens=False)
        id_lists = [e.ids for e in encs]
        lens = np.fromiter(map(len, id_lists), np.int64, len(id_lists))
        ids = np.fromiter(itertools.chain.from_iterable(id_lists), np.int32, int(lens.sum()))
    else:
        encs = None
        ids, lens = tok.encode_batch_flat(flat)
    flags = table[ids].astype(np.uint8)
    if encs is not None:
        cjk = _STATE["cjk"]
        is_cjk = cjk[ids]
        if is_cjk.any():
            offs = np.concatenate([[0], np.cumsum(lens)])
            for k, (text, enc) in enumerate(zip(flat, encs)):
                lo, hi = int(offs[k]), int(offs[k + 1])
                sel = is_cjk[lo:hi]
                if not sel.any():
                    continue
                word_starts = np.fromiter((start for _, start, _ in jieba.tokenize(text)), np.int64)
                tok_starts = np.fromiter((o[0] for o in enc.offsets), np.int64, hi - lo)
                f = flags[lo:hi]
                f[sel] = np.isin(tok_starts[sel], word_starts)
    out = []
    pos = k = 0
    for d in docs:
        dl = lens[k : k + len(d)]
        k += len(d)
        n = int(dl.sum())
        out.append((ids[pos : pos + n], flags[pos : pos + n], dl[dl > 0]))
        pos += n
    return out


def _process_unit(unit: Unit) -> dict:
    """Tokenize one unit of documents and build its instances (and static masks). Runs in a worker.

    Returns the arrays of :class:`~litebert.data.instances.DocumentInstances` (plus ``masked``/``labels`` with
    static masking) and the unit's ``index``, ``pass_index``, ``documents`` and counts."""
    pass_index, first_doc, docs = unit.pass_index, unit.first_doc, unit.docs
    tok, cfg = _STATE["tok"], _STATE["cfg"]
    tokenized = _tokenize_unit(docs)
    others = None
    if cfg.inter_sentence_task in ("nsp", "sop-official"):
        others = [(first_doc + j, t, f, sl) for j, (t, f, sl) in enumerate(tokenized) if len(sl)]
    out = DocumentInstances()
    dropped = 0
    for j, (toks, flags, sent_lens) in enumerate(tokenized):
        if not len(sent_lens):
            dropped += 1
            continue
        rng = doc_rng(cfg.seed, pass_index, first_doc + j)
        made = create_instances_from_document(
            first_doc + j,
            toks,
            flags,
            sent_lens,
            _STATE["settings"],
            rng,
            tok.cls_token_id,
            tok.sep_token_id,
            out,
            others,
        )
        dropped += made == 0
    arrays = out.arrays()
    arrays["n_sentences"] = sum(len(t[2]) for t in tokenized)
    arrays["n_doc_tokens"] = sum(len(t[0]) for t in tokenized)
    arrays["n_unknown_tokens"] = sum(int(np.count_nonzero(t[0] == _STATE["unk"])) for t in tokenized)
    arrays["dropped"] = dropped
    arrays["single_sentence_docs"] = sum(len(t[2]) == 1 for t in tokenized)
    arrays.update(index=unit.index, pass_index=pass_index, documents=len(docs))
    if cfg.static_masking and len(arrays["lengths"]):
        arrays["masked"], arrays["labels"] = _static_mask(arrays, pass_index, first_doc)
    return arrays


def _static_mask(arrays: dict, pass_index: int, first_doc: int) -> tuple[np.ndarray, np.ndarray]:
    cfg = _STATE["cfg"]
    lengths = arrays["lengths"]
    n, S = len(lengths), int(lengths.max())
    offs = np.concatenate([[0], np.cumsum(lengths)])
    pos = np.arange(S)
    valid = pos[None, :] < lengths[:, None]
    gather = np.minimum(offs[:-1, None] + pos[None, :], len(arrays["tokens"]) - 1)
    ids = np.where(valid, arrays["tokens"][gather], _STATE["tok"].pad_token_id)
    ws = np.where(valid, arrays["word_start"][gather], 0)
    keys = mask_keys(cfg.seed, pass_index, (np.int64(first_doc) << 20) + np.arange(n))
    masked, labels = mask_batch(
        ids,
        ws,
        lengths,
        keys,
        mask_token_id=_STATE["tok"].mask_token_id,
        special_ids=_STATE["special"],
        random_ids=_STATE["random_ids"],
        masked_lm_prob=cfg.masked_lm_prob,
        max_predictions_per_seq=cfg.max_predictions_per_seq,
        max_ngram=cfg.max_ngram,
    )
    return masked[valid].astype(np.int32), labels[valid].astype(np.int32)


# ------------------------------------------------------------------------------------------------------------
# Main side
# ------------------------------------------------------------------------------------------------------------
class Unit(NamedTuple):
    """Documents ``first_doc``, ``first_doc + 1``, … of pass ``pass_index``: ``index`` counts units over all passes
    from 0 and decides the partition (``index % num_partitions``)."""

    index: int
    pass_index: int
    first_doc: int
    docs: list[list[str]]


def _units(cfg: PrepareConfig, stats: list[CorpusStats], start: int = 0):
    """Yield this partition's :class:`Unit` s from unit ``start`` on; deterministic in the corpus alone.

    Every unit is delimited (that needs the whole document stream: each partition reads the whole corpus), but
    only the selected ones keep their documents."""
    index = 0
    for p in range(cfg.dupe_factor):
        st = CorpusStats()
        stats.append(st)
        docs: list[list[str]] = []
        count = size = first = 0
        keep = _selected(cfg, index, start)
        docs_read = read_documents(
            cfg.corpus,
            format=cfg.format,
            stats=st,
            on_invalid=cfg.on_invalid,
            defer_split=True,
            text_column=getattr(cfg, "text_column", "text"),
        )
        for n_read, doc in enumerate(docs_read, 1):
            count += 1
            size += sum(map(len, doc))
            if keep:
                docs.append(doc)
            if count >= UNIT_DOCS or size >= UNIT_BYTES:
                if keep:
                    yield Unit(index, p, first, docs)
                index += 1
                keep = _selected(cfg, index, start)
                docs, count, size, first = [], 0, 0, n_read
        if count:
            if keep:
                yield Unit(index, p, first, docs)
            index += 1


def _selected(cfg: PrepareConfig, index: int, start: int) -> bool:
    return index >= start and index % cfg.num_partitions == cfg.partition


def _ordered_results(cfg: PrepareConfig, units):
    """Results of ``units`` (:func:`_process_unit`) in order, computed in-process or by a pool of workers; at most
    ``2 × workers`` units are in flight, so memory does not grow with the corpus."""
    if cfg.workers == 1:
        _init_worker(cfg.tokenizer, cfg)
        for unit in units:
            yield _process_unit(unit)
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
    env_before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process; workers are the parallelism
    try:
        with ctx.Pool(cfg.workers, initializer=_init_worker, initargs=(cfg.tokenizer, cfg)) as pool:
            pending: deque = deque()
            for unit in units:
                pending.append(pool.apply_async(_process_unit, (unit,)))
                while len(pending) >= 2 * cfg.workers:
                    yield pending.popleft().get()
            while pending:
                yield pending.popleft().get()
    finally:
        if env_before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = env_before


_TOKEN_KEYS = ("tokens", "masked", "labels", "word_start")
_INSTANCE_KEYS = ("lengths", "meta")


def _slice_instances(arrays: dict, lo: int, hi: int | None = None) -> dict:
    """The instances ``lo:hi`` of a unit's (or a buffer's) arrays: per-instance and per-token arrays cut alike."""
    offs = np.concatenate([[0], np.cumsum(arrays["lengths"])])
    n = len(arrays["lengths"])
    hi = n if hi is None else hi
    t0, t1 = int(offs[lo]), int(offs[hi])
    return {
        k: v[lo:hi] if k in _INSTANCE_KEYS else v[t0:t1]
        for k, v in arrays.items()
        if k in _INSTANCE_KEYS or k in _TOKEN_KEYS
    }


class _ShardWriter:
    """Buffers unit results and writes shards of exactly ``shard_size`` instances (the last one smaller).

    After each shard it calls ``on_shard(unit_index, written)``: the shards now hold every instance of the units
    before ``unit_index`` and the first ``written`` of unit ``unit_index`` (the buffer only ever holds the tail of
    the last unit added once a shard is cut from it), which is the position a resumed run continues from.
    """

    def __init__(self, directory: Path, shard_size: int, static: bool, id_dtype, entries: list, on_shard) -> None:
        self.dir, self.shard_size, self.static, self.id_dtype = directory, shard_size, static, id_dtype
        self.buf: list[dict] = []
        self.n = 0
        self.entries: list[dict] = list(entries)
        self.on_shard = on_shard

    def add(self, arrays: dict, skip: int = 0) -> None:
        """Buffer the unit's instances from ``skip`` on (the first ``skip`` are in shards already)."""
        n_unit = len(arrays["lengths"])
        if n_unit > skip:
            keys = ("masked" if self.static else "tokens", "word_start", "lengths", "meta") + (
                ("labels",) if self.static else ()
            )
            tail = _slice_instances(arrays, skip) if skip else arrays
            self.buf.append({k: tail[k] for k in keys})
            self.n += n_unit - skip
        while self.n >= self.shard_size:
            self._write(self.shard_size)
            self.on_shard(arrays["index"], n_unit - self.n)

    def flush(self) -> None:
        if self.n:
            self._write(self.n)

    def _write(self, count: int) -> None:
        merged = {k: np.concatenate([b[k] for b in self.buf]) for k in self.buf[0]}
        head, rest = _slice_instances(merged, 0, count), _slice_instances(merged, count)
        self.buf = [rest] if len(rest["lengths"]) else []
        self.n -= count
        out = {
            "input_ids": head["masked" if self.static else "tokens"].astype(self.id_dtype),
            "word_start": head["word_start"],
            "offsets": np.concatenate([[0], np.cumsum(head["lengths"])]).astype(np.int64),
            "meta": head["meta"],
        }
        if self.static:
            out["labels"] = head["labels"].astype(np.int32)
        self.entries.append(write_shard(self.dir, len(self.entries), out))


@dataclass
class _Counts:
    """What the manifest counts, summed over this partition's units (documents, sentences, corpus tokens and
    single-sentence documents of pass 0; instances, tokens and dropped documents of every pass)."""

    documents: int = 0
    sentences: int = 0
    corpus_tokens: int = 0
    unknown_tokens: int = 0
    single_sentence_documents: int = 0
    instances: int = 0
    tokens: int = 0
    dropped_documents: int = 0

    def add(self, r: dict) -> None:
        if r["pass_index"] == 0:
            self.documents += r["documents"]
            self.sentences += r["n_sentences"]
            self.corpus_tokens += r["n_doc_tokens"]
            self.unknown_tokens += r["n_unknown_tokens"]
            self.single_sentence_documents += r["single_sentence_docs"]
        self.instances += len(r["lengths"])
        self.tokens += int(r["lengths"].sum())
        self.dropped_documents += r["dropped"]


UNKNOWN_WARN_SHARE = 0.05
"""A corpus whose tokens are more than this share the tokenizer's unknown token is warned about: the quick start's
SentencePiece tokenizer leaves 2.0 % of WikiText-2 train unknown (54,328 of 2,695,788 tokens: its rare characters),
an English WordPiece tokenizer 70 % of Chinese news (zh_news_albert_zh)."""


def unknown_share_warning(unknown: int, total: int, unk_token: str) -> str:
    """``"; warning: ..."`` for the summary when more than :data:`UNKNOWN_WARN_SHARE` of ``total`` corpus tokens are
    the tokenizer's unknown token (a tokenizer of another language or script), else ``""``."""
    if not total or unknown / total <= UNKNOWN_WARN_SHARE:
        return ""
    return (
        f"; warning: {unknown / total:.1%} of the corpus tokens ({unknown} of {total}) are the unknown token "
        f"{unk_token!r}: the tokenizer does not cover this corpus (another language or script?); train one on it "
        "with litebert train-tokenizer"
    )


def is_prepared_dir(directory: Path) -> bool:
    """Whether ``directory`` holds a ``litebert prepare`` output: a ``manifest.json`` of the shards format."""
    try:
        with open(directory / "manifest.json", encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT_NAME


def prepare(cfg: PrepareConfig) -> PrepareResult:
    """Run the pipeline of the module docstring and write ``cfg.output``; returns counts and the summary line.

    The output is built in ``.OUTPUT.partial`` beside it, with a progress record after every shard: the same
    command run again after a kill continues from the last complete shard (:func:`partial_directory`).

    Raises:
        LitebertError: bad corpus files, tokenizer directory, settings (see :class:`PrepareConfig`); an output that
            is, contains or is inside the corpus or the tokenizer; an existing non-empty output that is not an
            earlier ``prepare`` output, or is one and ``overwrite`` is not set; a partial output of other settings
            (without ``overwrite``) or one another process is writing; a corpus that yields no instance.
    """
    t0 = time.perf_counter()
    sources = check_corpus(cfg.corpus, format=cfg.format, text_column=getattr(cfg, "text_column", "text"))
    tok = load_tokenizer(cfg.tokenizer)
    size = corpus_bytes(sources)
    out = Path(cfg.output)
    # --overwrite replaces the whole directory: only ever an earlier prepare output, never what prepare reads
    check_output_target(
        out,
        sources={"--corpus": [c for c in cfg.corpus if not str(c).startswith("hf://")], "--tokenizer": cfg.tokenizer},
        replaceable=is_prepared_dir,
        earlier="an earlier `litebert prepare` output (manifest.json)",
        overwrite=cfg.overwrite,
    )
    identity = {
        "settings": cfg.settings(),
        "partition": {"index": cfg.partition, "count": cfg.num_partitions},
        "corpus": [_source_identity(s) for s in sources],
        "tokenizer": tok.info(),
    }
    with partial_directory(out, identity, overwrite=cfg.overwrite) as (tmp, progress):
        result = _prepare_into(cfg, tok, tmp, progress, identity, size, t0)
    result.output = out
    return result


def _source_identity(source) -> dict:
    """A corpus source as a resumed run must find it again: name and size, and a local file's mtime."""
    d = source.describe()
    if source.path is not None:
        d["mtime_ns"] = source.path.stat().st_mtime_ns
    return d


PROGRESS_NAME = "progress.json"
_LOCK_NAME = ".lock"
# tests only: SIGKILL the process group (only when prepare leads its own) once this many shards are written
_TEST_KILL = "LITEBERT_TEST_PREPARE_KILL_AT_SHARD"


@contextlib.contextmanager
def partial_directory(out: Path, identity: dict, overwrite: bool = False):
    """Build ``out`` in ``.OUTPUT.partial`` beside it and install it when the block succeeds; yield ``(directory,
    progress)``, ``progress`` being the last record of an earlier run of the same ``identity`` killed before it
    finished (None for a fresh start).

    The directory name is the output's (not the process's), so the next run finds it; a lock (``flock``) held
    while the block runs keeps a second process out and is released by the kernel when the process dies. A
    partial directory of other settings is refused (or, with ``overwrite``, discarded). Files in it that the
    progress record does not list (a shard cut after the record, a temporary file of a killed write) are removed.
    Temporary directories ``.OUTPUT.tmp-PID`` of dead processes (earlier litebert versions) are removed. A
    :class:`LitebertError` in the block (bad input) removes the partial directory; any other exception (a kill, a
    full disk, Ctrl-C) leaves it for the next run to continue.

    Raises:
        LitebertError: another process holds the lock; a partial directory of other settings without ``overwrite``.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(out)
    tmp = out.with_name(f".{out.name}.partial")
    tmp.mkdir(exist_ok=True)
    lock = open(tmp / _LOCK_NAME, "a+")  # noqa: SIM115 - held for the whole block
    try:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise LitebertError(
                f"another `litebert prepare` is writing {out} (its partial directory {tmp} is locked); wait for it "
                "or stop it (nothing was written)"
            ) from None
        progress = _read_progress(tmp, identity, overwrite)
        keep = {_LOCK_NAME}
        if progress is not None:
            keep |= {PROGRESS_NAME} | {f["path"] for s in progress["shards"] for f in s["files"].values()}
        for p in tmp.iterdir():
            if p.name not in keep:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        try:
            yield tmp, progress
        except LitebertError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except BaseException:
            if (tmp / PROGRESS_NAME).is_file():
                print(
                    f"prepare stopped; {tmp} keeps the finished shards: run the same command to continue",
                    file=sys.stderr,
                )
            raise
        (tmp / PROGRESS_NAME).unlink(missing_ok=True)
        (tmp / _LOCK_NAME).unlink()
    finally:
        lock.close()
    install_directory(tmp, out)


def _read_progress(tmp: Path, identity: dict, overwrite: bool) -> dict | None:
    path = tmp / PROGRESS_NAME
    if not path.is_file():
        return None
    try:
        progress = read_json(path, what="prepare progress record", expect=dict)
    except LitebertError:
        return None  # written atomically, so never half: unreadable only if damaged; start over
    now = json.loads(json_text(identity))
    diffs = differences({k: progress.get(k) for k in now}, now)
    if not diffs:
        return progress
    if overwrite:
        return None
    shown = "; ".join(f"{k}: {a!r} there, {b!r} now" for k, a, b in diffs[:4])
    more = f" and {len(diffs) - 4} more" if len(diffs) > 4 else ""
    raise LitebertError(
        f"{tmp} holds an unfinished prepare of {tmp.name[1:-8]} with other settings or inputs ({shown}{more}): run "
        "the command it was started with to continue it, or pass --overwrite to discard it (nothing was written)"
    )


def differences(a, b, where: str = "") -> list[tuple[str, object, object]]:
    """``(dotted key, a's value, b's value)`` of every leaf where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k), b.get(k), f"{where}.{k}" if where else str(k))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [(where, a, b)]


def _prepare_into(
    cfg: PrepareConfig, tok, tmp: Path, progress: dict | None, identity: dict, size: int | None, t0: float
) -> PrepareResult:
    id_dtype = np.uint16 if tok.vocab_size <= 65535 else np.int32
    counts = _Counts(**progress["counts"]) if progress else _Counts()
    start, skip = (progress["next_unit"], progress["skip_instances"]) if progress else (0, 0)

    def save_progress(unit_index: int, written: int) -> None:
        if os.environ.get(_TEST_KILL) == str(len(writer.entries)) and os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)  # test hook: killed after a shard's files, before its progress record
        record = {**identity, "next_unit": unit_index, "skip_instances": written}
        atomic_write_json(tmp / PROGRESS_NAME, {**record, "counts": asdict(counts), "shards": writer.entries})

    writer = _ShardWriter(
        tmp, cfg.shard_size, cfg.static_masking, id_dtype, progress["shards"] if progress else [], save_progress
    )
    stats: list[CorpusStats] = []
    total = size * cfg.dupe_factor if size is not None else None
    bar = tqdm(
        total=total, unit="B", unit_scale=True, desc="prepare", disable=not cfg.progress, file=sys.stderr, leave=False
    )
    seen = 0
    try:
        for arrays in _ordered_results(cfg, _units(cfg, stats, start)):
            writer.add(arrays, skip if arrays["index"] == start else 0)
            counts.add(arrays)
            now = sum(s.input_bytes for s in stats)
            bar.update(now - seen)
            seen = now
        writer.flush()
    finally:
        bar.close()
    corpus_docs = stats[0].documents if stats else 0
    skipped = stats[0].skipped_lines if stats else 0
    parted = cfg.num_partitions > 1
    if counts.instances == 0 and not (parted and corpus_docs):
        skipped_note = (
            f"; {skipped} line(s) were skipped as invalid (first: {stats[0].first_skipped}), check "
            "--format and the file's encoding"
            if skipped
            else ""
        )
        if corpus_docs == 0:
            names = [e["source"] for e in stats[0].sources] if stats else []
            what = names[0] if len(names) == 1 else f"the corpus ({name_list(names)})"
            why = ": every file is empty" if stats and len(stats[0].empty_files) == len(names) else ""
            raise LitebertError(f"no instances were made: {what} gave no document{why}{skipped_note}")
        raise LitebertError(
            f"no instances were made from {corpus_docs} documents ({counts.corpus_tokens} tokens): every document is "
            "a single sentence of fewer than 2 tokens (or empty after tokenization); SOP needs two non-empty "
            "segments. Use a corpus with longer documents (one sentence per line, a blank line between "
            f"documents){skipped_note}"
        )
    tok_dir = tmp / "tokenizer"
    tok.save(tok_dir)
    random_entry = save_npy(tmp / "random_ids.npy", tok.random_replacement_ids())
    text_bytes = stats[0].bytes if stats else 0
    manifest = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "tokenizer": {**tok.info(), "path": "tokenizer", "files": sorted(p.name for p in tok_dir.iterdir())},
        "settings": cfg.settings(),
        "counts": {
            "documents": counts.documents,
            "sentences": counts.sentences,
            "corpus_tokens": counts.corpus_tokens,
            "unknown_tokens": counts.unknown_tokens,
            "instances": counts.instances,
            "tokens": counts.tokens,
            "dropped_documents": counts.dropped_documents,
            "skipped_lines": skipped,
            "first_skipped_line": stats[0].first_skipped if stats else None,
            "bytes": text_bytes,
            "passes": cfg.dupe_factor,
        },
        "corpus": stats[0].sources if stats else [],
        "random_ids": random_entry,
        "shards": writer.entries,
    }
    if parted:
        manifest["partition"] = dict(identity["partition"])
    atomic_write_json(tmp / "manifest.json", manifest)
    seconds = time.perf_counter() - t0
    read = sum(s.bytes for s in stats)
    res = PrepareResult(
        output=tmp,
        documents=counts.documents,
        sentences=counts.sentences,
        instances=counts.instances,
        tokens=counts.tokens,
        shards=len(writer.entries),
        bytes_read=read,
        seconds=seconds,
        skipped_lines=skipped,
        dropped_documents=counts.dropped_documents,
        manifest=manifest,
    )
    where = f"partition {cfg.partition} of {cfg.num_partitions}: " if parted else ""
    res.summary = (
        f"{where}prepared {res.documents} documents, {res.sentences} sentences -> {res.instances} instances, "
        f"{res.tokens} tokens in {res.shards} shard(s); {read / 1e6:.1f} MB in {seconds:.1f} s "
        f"= {res.mb_per_s:.2f} MB/s"
    )
    if progress:
        res.summary += f" (continued an interrupted run from shard {len(progress['shards'])})"
    if skipped:
        res.summary += f"; skipped {skipped} invalid line(s) (first: {stats[0].first_skipped})"
    if stats and stats[0].empty_files:
        res.summary += f"; {empty_files_note(stats[0].empty_files)}"
    if counts.dropped_documents:
        res.summary += f"; {counts.dropped_documents} document(s) gave no instance"
    res.summary += unknown_share_warning(counts.unknown_tokens, counts.corpus_tokens, tok.special_tokens["unk"])
    if parted and counts.instances == 0:
        res.summary += (
            f"; warning: this partition got no instance (the corpus has {corpus_docs} documents, grouped in units of "
            f"{UNIT_DOCS} documents or {UNIT_BYTES // 1024} KiB): fewer partitions would do"
        )
    if cfg.inter_sentence_task == "nsp" and corpus_docs < 2:
        # an NSP negative takes its B from another document: with one document every label is 0 ("is next")
        res.summary += (
            f"; warning: --inter-sentence-task nsp needs at least two documents for its negatives (random next "
            f"segments); the corpus has {corpus_docs}, so all {counts.instances} instances have label 0"
        )
    if counts.documents and counts.single_sentence_documents == counts.documents:
        res.summary += (
            "; note: every document is a single sentence, so every pair comes from splitting a "
            "sentence (is the corpus one document per line without blank lines between documents?)"
        )
    return res
