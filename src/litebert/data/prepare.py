"""``litebert prepare``: corpus → tokenized documents → SOP instances → (static masks) → shards + manifest.

Pipeline (pure, seeded stages with inspectable artifacts):

1. :func:`litebert.corpus.read_documents` streams documents (lists of sentences) from the files.
2. Documents are grouped into *units* (64 documents or 512 KiB of text, whichever first; the grouping depends only
   on the corpus). Each unit is tokenized and turned into instances (:mod:`litebert.data.instances`) by a worker;
   each document uses a generator seeded by ``(seed, pass, doc_index)``, so results do not depend on ``--workers``.
3. Results come back in unit order and are written into shards of about ``shard_size`` instances; at most
   ``2 × workers`` units are in flight, so memory is bounded by a shard plus a few units, not by the corpus.
4. ``manifest.json`` records the format, tokenizer, every setting, counts and sha256 of every file.

With ``static_masking`` the corpus is read ``dupe_factor`` times (pass p), each pass making new instances and
masks (as the official script); masks use keys ``(seed, pass, unit_first_doc << 20 | j)``. Dynamic masking (the
default) stores unmasked instances; :class:`~litebert.data.dataset.PretrainingDataset` masks them per epoch.
"""

from __future__ import annotations

import itertools
import json
import logging
import multiprocessing as mp
import os
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from litebert.corpus import FORMATS, CorpusStats, expand_document, read_documents, resolve_corpus_files
from litebert.data.instances import DocumentInstances, InstanceSettings, create_instances_from_document, doc_rng
from litebert.data.masking import mask_batch, mask_keys
from litebert.data.shards import FORMAT_NAME, FORMAT_VERSION, save_npy, write_shard
from litebert.errors import LitebertError
from litebert.fileio import atomic_directory, atomic_write_json, check_output_target
from litebert.settings import check, fail, setting
from litebert.tokenization import is_cjk_char, load_tokenizer

UNIT_DOCS = 64
UNIT_BYTES = 512 * 1024


@dataclass
class PrepareConfig:
    """Settings of ``litebert prepare`` (docs/algorithms.md §2, §3): the command's options, one field each (derived
    from here).

    Raises :class:`~litebert.errors.LitebertError` ``"--option value: why"`` on construction for a bad value.
    """

    corpus: list[str] = setting(metavar="FILE", help="corpus files or directories")
    tokenizer: str = setting(metavar="DIR", help="tokenizer directory (see litebert.tokenization.load_tokenizer)")
    output: str = setting(
        metavar="DIR", help="output directory (created; must not exist or be empty unless --overwrite)"
    )
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
    text_column: str = setting(
        "text", metavar="NAME", help="the text field of JSON lines, the text column of Parquet/Arrow files and Hub rows"
    )
    max_position_embeddings: int = setting(
        512, ge=1, help="the model's position table size: --max-seq-length may not exceed it"
    )
    shard_size: int = setting(100_000, ge=1, help="instances per shard (about; shards end at unit boundaries)")
    on_invalid: str = setting(
        "skip",
        option="--on-invalid-utf8",
        choices=("skip", "error"),
        help="lines that are not valid UTF-8: skip (and count) or error",
    )
    overwrite: bool = setting(False, help="replace an earlier prepare output directory (one with its manifest.json)")
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

    def settings(self) -> dict:
        """The settings recorded in the manifest (what determines the bytes; not workers/progress/paths)."""
        d = asdict(self)
        for k in ("workers", "progress", "overwrite", "output", "corpus", "tokenizer", "shard_size"):
            d.pop(k)
        d["masking"] = "static" if self.static_masking else "dynamic"
        d["shard_size"] = self.shard_size
        return d


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


def _process_unit(unit: tuple[int, int, list[list[str]]]) -> dict:
    """Tokenize one unit of documents and build its instances (and static masks). Runs in a worker."""
    pass_index, first_doc, docs = unit
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
    arrays["dropped"] = dropped
    arrays["single_sentence_docs"] = sum(len(t[2]) == 1 for t in tokenized)
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
def _units(cfg: PrepareConfig, stats: list[CorpusStats]):
    """Yield (pass, first_doc_index, docs) units; deterministic in the corpus alone."""
    for p in range(cfg.dupe_factor):
        st = CorpusStats()
        stats.append(st)
        docs: list[list[str]] = []
        size, first = 0, 0
        docs_read = read_documents(
            cfg.corpus,
            format=cfg.format,
            stats=st,
            on_invalid=cfg.on_invalid,
            defer_split=True,
            text_column=cfg.text_column,
        )
        for index, doc in enumerate(docs_read, 1):
            docs.append(doc)
            size += sum(len(s) for s in doc)
            if len(docs) >= UNIT_DOCS or size >= UNIT_BYTES:
                yield p, first, docs
                docs, size, first = [], 0, index
        if docs:
            yield p, first, docs


def _ordered_results(cfg: PrepareConfig, units):
    """Results of ``units`` in order, computed in-process or by a bounded pool of workers."""
    if cfg.workers == 1:
        _init_worker(cfg.tokenizer, cfg)
        for unit in units:
            yield unit, _process_unit(unit)
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
    env_before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process; workers are the parallelism
    try:
        with ctx.Pool(cfg.workers, initializer=_init_worker, initargs=(cfg.tokenizer, cfg)) as pool:
            pending: deque = deque()
            for unit in units:
                pending.append((unit, pool.apply_async(_process_unit, (unit,))))
                while len(pending) >= 2 * cfg.workers:
                    u, r = pending.popleft()
                    yield u, r.get()
            while pending:
                u, r = pending.popleft()
                yield u, r.get()
    finally:
        if env_before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = env_before


class _ShardWriter:
    """Buffers unit results and writes shards of exactly ``shard_size`` instances (the last one smaller)."""

    def __init__(self, directory: Path, shard_size: int, static: bool, id_dtype) -> None:
        self.dir, self.shard_size, self.static, self.id_dtype = directory, shard_size, static, id_dtype
        self.buf: list[dict] = []
        self.n = 0
        self.entries: list[dict] = []

    def add(self, arrays: dict) -> None:
        if len(arrays["lengths"]):
            keys = ("masked" if self.static else "tokens", "word_start", "lengths", "meta") + (
                ("labels",) if self.static else ()
            )
            self.buf.append({k: arrays[k] for k in keys})
            self.n += len(arrays["lengths"])
        while self.n >= self.shard_size:
            self._write(self.shard_size)

    def flush(self) -> None:
        if self.n:
            self._write(self.n)

    def _write(self, count: int) -> None:
        merged = {k: np.concatenate([b[k] for b in self.buf]) for k in self.buf[0]}
        ntok = int(merged["lengths"][:count].sum())
        head = {k: (v[:count] if k in ("lengths", "meta") else v[:ntok]) for k, v in merged.items()}
        rest = {k: (v[count:] if k in ("lengths", "meta") else v[ntok:]) for k, v in merged.items()}
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

    Raises:
        LitebertError: bad corpus files, tokenizer directory, settings (see :class:`PrepareConfig`); an output that
            is, contains or is inside the corpus or the tokenizer; an existing non-empty output that is not an
            earlier ``prepare`` output, or is one and ``overwrite`` is not set; a corpus that yields no instance.
    """
    t0 = time.perf_counter()
    files = resolve_corpus_files(cfg.corpus)
    tok = load_tokenizer(cfg.tokenizer)
    total_bytes = sum(f.stat().st_size for f in files) * cfg.dupe_factor
    out = Path(cfg.output)
    # --overwrite replaces the whole directory: only ever an earlier prepare output, never what prepare reads
    check_output_target(
        out,
        sources={"--corpus": list(cfg.corpus), "--tokenizer": cfg.tokenizer},
        replaceable=is_prepared_dir,
        earlier="an earlier `litebert prepare` output (manifest.json)",
        overwrite=cfg.overwrite,
    )
    with atomic_directory(out) as tmp:
        result = _prepare_into(cfg, tok, tmp, total_bytes, t0)
    result.output = out
    return result


def _prepare_into(cfg: PrepareConfig, tok, tmp: Path, total_bytes: int, t0: float) -> PrepareResult:
    id_dtype = np.uint16 if tok.vocab_size <= 65535 else np.int32
    writer = _ShardWriter(tmp, cfg.shard_size, cfg.static_masking, id_dtype)
    stats: list[CorpusStats] = []
    n_inst = n_tok = n_sent = n_doc_tok = dropped = 0
    n_sent_pass0 = 0
    single = 0
    bar = tqdm(
        total=total_bytes,
        unit="B",
        unit_scale=True,
        desc="prepare",
        disable=not cfg.progress,
        file=sys.stderr,
        leave=False,
    )
    seen = 0
    try:
        for unit, arrays in _ordered_results(cfg, _units(cfg, stats)):
            writer.add(arrays)
            if unit[0] == 0:
                n_sent_pass0 += arrays["n_sentences"]
                single += arrays["single_sentence_docs"]
            n_inst += len(arrays["lengths"])
            n_tok += int(arrays["lengths"].sum())
            n_sent += arrays["n_sentences"]
            n_doc_tok += arrays["n_doc_tokens"]
            dropped += arrays["dropped"]
            now = sum(s.bytes for s in stats)
            bar.update(now - seen)
            seen = now
        writer.flush()
    finally:
        bar.close()
    docs = stats[0].documents if stats else 0
    skipped = stats[0].skipped_lines if stats else 0
    if n_inst == 0:
        skipped_note = (
            f"; {skipped} line(s) were skipped as invalid (first: {stats[0].first_skipped}), check "
            "--format and the file's encoding"
            if skipped
            else ""
        )
        if docs == 0:
            raise LitebertError(f"no instances were made: the corpus gave no document{skipped_note}")
        raise LitebertError(
            f"no instances were made from {docs} documents ({n_doc_tok} tokens): every document is a single "
            "sentence of fewer than 2 tokens (or empty after tokenization); SOP needs two non-empty segments. "
            f"Use a corpus with longer documents (one sentence per line, a blank line between documents){skipped_note}"
        )
    tok_dir = tmp / "tokenizer"
    tok.save(tok_dir)
    random_entry = save_npy(tmp / "random_ids.npy", tok.random_replacement_ids())
    manifest = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "tokenizer": {**tok.info(), "path": "tokenizer", "files": sorted(p.name for p in tok_dir.iterdir())},
        "settings": cfg.settings(),
        "counts": {
            "documents": docs,
            "sentences": n_sent_pass0,
            "corpus_tokens": n_doc_tok // cfg.dupe_factor,
            "instances": n_inst,
            "tokens": n_tok,
            "dropped_documents": dropped,
            "skipped_lines": skipped,
            "first_skipped_line": stats[0].first_skipped if stats else None,
            "bytes": total_bytes // cfg.dupe_factor,
            "passes": cfg.dupe_factor,
        },
        "corpus": [{"file": Path(f).name, "format": fmt} for f, fmt in (stats[0].formats.items() if stats else [])],
        "random_ids": random_entry,
        "shards": writer.entries,
    }
    atomic_write_json(tmp / "manifest.json", manifest)
    seconds = time.perf_counter() - t0
    res = PrepareResult(
        output=tmp,
        documents=docs,
        sentences=manifest["counts"]["sentences"],
        instances=n_inst,
        tokens=n_tok,
        shards=len(writer.entries),
        bytes_read=total_bytes,
        seconds=seconds,
        skipped_lines=skipped,
        dropped_documents=dropped,
        manifest=manifest,
    )
    res.summary = (
        f"prepared {res.documents} documents, {res.sentences} sentences -> {res.instances} instances, "
        f"{res.tokens} tokens in {res.shards} shard(s); {total_bytes / 1e6:.1f} MB in {seconds:.1f} s "
        f"= {res.mb_per_s:.2f} MB/s"
    )
    if skipped:
        res.summary += f"; skipped {skipped} invalid line(s) (first: {stats[0].first_skipped})"
    if dropped:
        res.summary += f"; {dropped} document(s) gave no instance"
    if cfg.inter_sentence_task == "nsp" and docs < 2:
        # an NSP negative takes its B from another document: with one document every label is 0 ("is next")
        res.summary += (
            f"; warning: --inter-sentence-task nsp needs at least two documents for its negatives (random next "
            f"segments); the corpus has {docs}, so all {n_inst} instances have label 0"
        )
    if docs and single == docs:
        res.summary += (
            "; note: every document is a single sentence, so every pair comes from splitting a "
            "sentence (is the corpus one document per line without blank lines between documents?)"
        )
    return res
