"""Pretraining instances from tokenized documents (docs/algorithms.md §2; google-research/albert
``create_pretraining_data.py`` ``create_instances_from_document`` and ``truncate_seq_pair``).

A document is its token ids (``int32``, sentences concatenated), the parallel ``uint8`` "word start" flags and
the sentence lengths. Each document is processed with its own generator seeded by ``(seed, pass, doc_index)``, so the
output never depends on how documents are spread over worker processes.

Where we differ from the official script (and why), as docs/algorithms.md §2 says:
- a chunk of a single sentence is split at a random token boundary into A and B (dropped if < 2 tokens); the
  official code pairs it with text of *another* document labelled "swapped", which leaks NSP negatives into SOP;
  ``inter_sentence_task="sop-official"`` restores the official behaviour (for the ablation that measures its
  effect: a one-sentence chunk becomes A = the sentence, B = a random segment of another nearby document, label 1);
- truncation draws the number of front removals of each segment as Binomial(r, 0.5), which is the distribution of
  the official one-token-at-a-time coin flips, in O(1).

Every instance records where its text came from (:data:`META_FIELDS`), so tests can check that A and B are
consecutive text of one document.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Columns of the int64 ``meta`` array stored per instance. Token positions are offsets into the document's token
# stream (its sentences concatenated). "a"/"b" are the first/second segment as laid out (after any swap);
# "*_orig_*" are the spans before truncation; ``b_doc`` differs from ``doc`` only under NSP's random next.
META_FIELDS = (
    "doc",
    "a_start",
    "a_end",
    "b_doc",
    "b_start",
    "b_end",
    "a_orig_start",
    "a_orig_end",
    "b_orig_start",
    "b_orig_end",
    "sent_start",
    "sent_end",
    "target_len",
    "label",
    "len_a",
)
META_INDEX = {name: i for i, name in enumerate(META_FIELDS)}


@dataclass(frozen=True)
class InstanceSettings:
    """The §2 settings an instance builder needs (a subset of ``PrepareConfig``)."""

    max_seq_length: int = 128
    short_seq_prob: float = 0.1
    inter_sentence_task: str = "sop"  # "sop" | "nsp" | "none" | "sop-official"


def doc_rng(seed: int, pass_index: int, doc_index: int) -> np.random.Generator:
    """The generator of one document in one pass (independent of workers and of other documents)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, pass_index, doc_index, 0x5EED])))


def truncated_lengths(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """Final segment lengths after docs/algorithms.md §2 truncation: remove one token at a time from the longer segment
    (B on a tie) until ``len_a + len_b <= max_num_tokens``; closed form of that loop."""
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return len_a, len_b
    if len_a > len_b:
        d = min(excess, len_a - len_b)
        len_a -= d
        excess -= d
    elif len_b > len_a:
        d = min(excess, len_b - len_a)
        len_b -= d
        excess -= d
    # equal now: B loses first on each tie, then A, alternating
    len_b -= (excess + 1) // 2
    len_a -= excess // 2
    return len_a, len_b


class DocumentInstances:
    """Accumulates instances of many documents as flat arrays (the unit a worker returns).

    ``tokens``: int32, the laid-out ``[CLS] A [SEP] B [SEP]`` of every instance concatenated; ``word_start``:
    uint8 flags aligned with ``tokens`` (0 on ``[CLS]``/``[SEP]``, 1 on the first token of each segment);
    ``lengths``: int64 per instance; ``meta``: int64 ``[n, len(META_FIELDS)]``.
    """

    def __init__(self) -> None:
        self.tokens: list[np.ndarray] = []
        self.word_start: list[np.ndarray] = []
        self.lengths: list[int] = []
        self.meta: list[tuple[int, ...]] = []

    def __len__(self) -> int:
        return len(self.lengths)

    def arrays(self) -> dict[str, np.ndarray]:
        if not self.lengths:
            return {
                "tokens": np.zeros(0, np.int32),
                "word_start": np.zeros(0, np.uint8),
                "lengths": np.zeros(0, np.int64),
                "meta": np.zeros((0, len(META_FIELDS)), np.int64),
            }
        return {
            "tokens": np.concatenate(self.tokens).astype(np.int32, copy=False),
            "word_start": np.concatenate(self.word_start).astype(np.uint8, copy=False),
            "lengths": np.asarray(self.lengths, np.int64),
            "meta": np.asarray(self.meta, np.int64),
        }


def create_instances_from_document(
    doc_index: int,
    doc_tokens: np.ndarray,
    doc_flags: np.ndarray,
    sent_lens: np.ndarray,
    settings: InstanceSettings,
    rng: np.random.Generator,
    cls_id: int,
    sep_id: int,
    out: DocumentInstances,
    other_docs: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] | None = None,
) -> int:
    """Append the instances of one document to ``out`` (docs/algorithms.md §2); returns how many were made.

    Args:
        doc_index: global index of the document (recorded in ``meta``).
        doc_tokens: ``int32 [T]`` the document's token ids, sentences concatenated.
        doc_flags: ``uint8 [T]`` word-start flags aligned with ``doc_tokens``.
        sent_lens: ``int64 [n_sentences]`` sentence lengths (all ≥ 1, summing to T).
        rng: this document's generator (:func:`doc_rng`).
        other_docs: ``(doc_index, tokens, flags, sent_lens)`` of nearby documents, for NSP's random next segment.
    """
    max_num_tokens = settings.max_seq_length - 3
    target = max_num_tokens
    if rng.random() < settings.short_seq_prob:
        target = int(rng.integers(2, max_num_tokens + 1))
    sent_off = np.concatenate([[0], np.cumsum(sent_lens)]).tolist()
    lens = sent_lens.tolist()
    made = 0
    task = settings.inter_sentence_task
    i, chunk_start, length = 0, 0, 0
    n_sent = len(lens)
    while i < n_sent:
        length += lens[i]
        if i == n_sent - 1 or length >= target:
            chunk_end = i + 1
            n_chunk = chunk_end - chunk_start
            c0, c1 = sent_off[chunk_start], sent_off[chunk_end]
            official_random = task == "sop-official" and n_chunk == 1 and bool(other_docs)
            if n_chunk >= 2:
                a_end_sent = chunk_start + int(rng.integers(1, n_chunk))
                split = sent_off[a_end_sent]
            elif official_random:  # the official script: the whole sentence is A, B comes from another document
                split, a_end_sent = c1, chunk_start + 1
            elif c1 - c0 >= 2:  # one sentence: split at a random token boundary, both parts non-empty
                split = c0 + int(rng.integers(1, c1 - c0))
                a_end_sent = chunk_start
            else:
                split = -1  # a one-token chunk cannot make two segments
            if split >= 0:
                first = (doc_index, c0, split)
                second = (doc_index, split, c1)
                label = 0
                b_arrays = None
                if official_random:
                    picked = _random_segment(other_docs, doc_index, max(1, target - (split - c0)), rng)
                    if picked is None:  # no other document: fall back to a plain SOP pair of nothing -> skip
                        chunk_start, length = i + 1, 0
                        i += 1
                        continue
                    label = 1
                    second, b_arrays = picked
                elif task in ("sop", "sop-official"):
                    if rng.random() < 0.5:
                        first, second, label = second, first, 1
                elif task == "nsp" and other_docs and rng.random() < 0.5:
                    picked = _random_segment(other_docs, doc_index, max(1, target - (split - c0)), rng)
                    if picked is not None:
                        label = 1
                        second, b_arrays = picked
                        if n_chunk >= 2:  # put the unused sentences back (as the official script does)
                            i = a_end_sent - 1
                            chunk_end = a_end_sent
                _emit(
                    out,
                    doc_tokens,
                    doc_flags,
                    first,
                    second,
                    b_arrays,
                    label,
                    chunk_start,
                    chunk_end,
                    target,
                    max_num_tokens,
                    rng,
                    cls_id,
                    sep_id,
                )
                made += 1
            chunk_start, length = i + 1, 0
        i += 1
    return made


def _random_segment(other_docs, doc_index, target_b, rng):
    candidates = [d for d in other_docs if d[0] != doc_index]
    if not candidates:
        return None
    j, toks, flags, lens = candidates[int(rng.integers(0, len(candidates)))]
    off = np.concatenate([[0], np.cumsum(lens)])
    s0 = int(rng.integers(0, len(lens)))
    s1 = s0
    while s1 < len(lens) and off[s1] - off[s0] < target_b:
        s1 += 1
    return (j, int(off[s0]), int(off[s1])), (toks, flags)


def _emit(
    out,
    doc_tokens,
    doc_flags,
    first,
    second,
    b_arrays,
    label,
    chunk_start,
    chunk_end,
    target,
    max_num_tokens,
    rng,
    cls_id,
    sep_id,
):
    (doc_index, a0, a1), (b_doc, b0, b1) = first, second
    la, lb = truncated_lengths(a1 - a0, b1 - b0, max_num_tokens)
    ra, rb = (a1 - a0) - la, (b1 - b0) - lb
    fa = int(rng.binomial(ra, 0.5)) if ra else 0  # removals from the front of A
    fb = int(rng.binomial(rb, 0.5)) if rb else 0
    ka0, ka1 = a0 + fa, a1 - (ra - fa)
    kb0, kb1 = b0 + fb, b1 - (rb - fb)
    b_toks, b_flags = b_arrays if b_arrays is not None else (doc_tokens, doc_flags)
    n = la + lb + 3
    toks = np.empty(n, np.int32)
    flags = np.zeros(n, np.uint8)
    toks[0] = cls_id
    toks[1 : la + 1] = doc_tokens[ka0:ka1]
    toks[la + 1] = sep_id
    toks[la + 2 : n - 1] = b_toks[kb0:kb1]
    toks[n - 1] = sep_id
    flags[1 : la + 1] = doc_flags[ka0:ka1]
    flags[la + 2 : n - 1] = b_flags[kb0:kb1]
    # a segment that begins inside a word (truncated or split) still begins a word of its own
    flags[1] = 1
    flags[la + 2] = 1
    out.tokens.append(toks)
    out.word_start.append(flags)
    out.lengths.append(n)
    out.meta.append((doc_index, ka0, ka1, b_doc, kb0, kb1, a0, a1, b0, b1, chunk_start, chunk_end, target, label, la))
