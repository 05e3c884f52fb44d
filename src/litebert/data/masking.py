"""n-gram whole-word masking (docs/algorithms.md §3; google-research/albert ``create_masked_lm_predictions``), vectorized
over a batch with numpy.

The algorithm per item is the official one: words are a start piece plus its continuations (the per-token
``word_start`` flags stored in the shards); ``num_to_predict = min(P, max(1, round(n_tokens · prob)))`` with
``n_tokens`` counting ``[CLS]`` and both ``[SEP]``; visit the word starts in a random order; at each draw
``n ∈ {1..max_ngram}`` with ``p(n) ∝ 1/n`` (renormalised over the n-grams that fit before the end of the item),
back off to shorter n while the n-gram would exceed ``num_to_predict``, skip it if it overlaps a chosen word, stop
when ``num_to_predict`` tokens are chosen. Each chosen token: 80% ``[MASK]``, 10% a random non-special token,
10% unchanged. Labels are the original ids at chosen positions, −100 elsewhere.

Vectorization: step k of the loop handles the k-th shuffled word of *every* item at once, so the Python loop runs
over shuffle steps (until all items are full), never over tokens.

Randomness is counter-based: every random number is ``splitmix64(key, stream, counter)`` where ``key`` is derived
from ``(seed, epoch, index)`` (:func:`mask_keys`). An item's masks therefore depend only on its own key, not on
the batch it is in, its padding or the number of workers, and a resumed run reproduces them exactly.
"""

from __future__ import annotations

import functools

import numpy as np

IGNORE_INDEX = -100
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_STREAM_ORDER, _STREAM_NGRAM, _STREAM_ACTION, _STREAM_RANDOM = 1, 2, 3, 4


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def mask_keys(seed: int, epoch: int, indices: np.ndarray) -> np.ndarray:
    """``uint64 [B]`` generator keys for items ``indices`` of ``epoch`` (the "(seed, epoch, index)" of docs/algorithms.md §3)."""
    with np.errstate(over="ignore"):
        idx = np.asarray(indices, dtype=np.int64).astype(np.uint64)
        k = _mix(np.full(idx.shape, seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64) + _GOLDEN)
        k = _mix(k ^ (np.uint64(epoch & 0xFFFFFFFFFFFFFFFF) * _M1 + _GOLDEN))
        return _mix(k ^ (idx * _M2 + _GOLDEN))


def _uniform(keys: np.ndarray, stream: int, n: int) -> np.ndarray:
    """``float64 [B, n]`` in [0, 1): counter ``j`` of ``stream`` of each key."""
    return _uniform_at(keys[:, None], stream, np.arange(n, dtype=np.uint64)[None, :])


def _uniform_at(keys: np.ndarray, stream, counters: np.ndarray) -> np.ndarray:
    """Uniforms in [0, 1) for broadcast triples (key, stream, counter): the values ``_uniform`` gives."""
    return _uniform_from(_stream_base(keys, stream), counters)


def _stream_base(keys: np.ndarray, stream) -> np.ndarray:
    """``uint64``, the broadcast of ``keys`` and ``stream``: the state a stream's counters are added to."""
    with np.errstate(over="ignore"):
        return _mix(keys ^ (np.asarray(stream, dtype=np.uint64) * _M2))


def _uniform_from(base: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Uniforms in [0, 1) for broadcast pairs (stream base from :func:`_stream_base`, counter)."""
    with np.errstate(over="ignore"):
        x = _mix(base + (np.asarray(counters, dtype=np.uint64) + np.uint64(1)) * _GOLDEN)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def ngram_probs(max_ngram: int) -> np.ndarray:
    """``p(n) ∝ 1/n`` for n = 1..max_ngram (3 → 6/11, 3/11, 2/11)."""
    p = 1.0 / np.arange(1, max_ngram + 1)
    return p / p.sum()


@functools.lru_cache(maxsize=8)
def _ngram_thresholds(max_ngram: int) -> np.ndarray:
    """``float64 [N + 1, N]`` (N = max_ngram): row ``m - 1`` (m = 1..N n-grams fit before the item's end) holds, in
    column ``j``, the least uniform that draws an n-gram longer than ``j`` words: 0 for ``j = 0``, then the cumulative
    p(n) renormalised over the ``m`` lengths, 2 (never) from ``j = m`` on; row N is 2 throughout (a step past the
    item's last word draws nothing). So ``u >= row`` is the mask of the lengths ``1..n`` of the drawn ``n``."""
    p = ngram_probs(max_ngram)
    table = np.full((max_ngram + 1, max_ngram), 2.0)
    for m in range(1, max_ngram + 1):
        table[m - 1, 0] = 0.0
        table[m - 1, 1:m] = np.cumsum(p[:m] / p[:m].sum())[: m - 1]
    table.flags.writeable = False
    return table


def mask_batch(
    input_ids: np.ndarray,
    word_start: np.ndarray,
    lengths: np.ndarray,
    keys: np.ndarray,
    *,
    mask_token_id: int,
    special_ids: np.ndarray,
    random_ids: np.ndarray,
    masked_lm_prob: float = 0.15,
    max_predictions_per_seq: int = 20,
    max_ngram: int = 3,
) -> tuple[np.ndarray, np.ndarray]:
    """Mask a padded batch (docs/algorithms.md §3).

    Args:
        input_ids: ``int [B, S]`` laid-out items (``[CLS] A [SEP] B [SEP]``), padded beyond ``lengths``.
        word_start: ``bool/uint8 [B, S]`` word-start flags (from the shards).
        lengths: ``int [B]`` real lengths (``n_tokens``, counting ``[CLS]`` and both ``[SEP]``).
        keys: ``uint64 [B]`` from :func:`mask_keys`.
        special_ids: ids never chosen (``[CLS]``, ``[SEP]``, pad, ``[MASK]``), or a ``bool [V]`` table of them.
        random_ids: ``int [K]`` ids for the 10% random replacement (no special tokens).

    Returns:
        ``(masked_ids int64 [B, S], labels int64 [B, S])``; labels are −100 where not predicted.
    """
    ids = np.ascontiguousarray(input_ids, dtype=np.int64)
    B, S = ids.shape
    lengths = np.asarray(lengths, dtype=np.int64)
    if masked_lm_prob <= 0:
        return ids.copy(), np.full_like(ids, IGNORE_INDEX)
    special_ids = np.asarray(special_ids)
    if special_ids.dtype == bool:  # a lookup table over the vocabulary
        is_special = special_ids[ids]
    else:
        is_special = np.isin(ids, special_ids)
    cand = np.arange(S) < lengths[:, None]
    cand &= ~is_special
    # a word starts at a flagged piece or after a non-candidate (a special token, or the item's start)
    starts = np.asarray(word_start) != 0
    starts[:, 1:] |= ~cand[:, :-1]
    starts[:, :1] = True
    starts &= cand
    budget = np.minimum(max_predictions_per_seq, np.maximum(1, np.rint(lengths * masked_lm_prob))).astype(np.int64)

    # ---- words: index per token, length per word ----
    wid = np.cumsum(starts, axis=1)
    wid -= 1  # (B, S) word index of each candidate token
    n_words = wid[:, -1] + 1 if S else np.zeros(B, np.int64)  # (B,)
    W = max(int(n_words.max()) if B else 0, 1)
    N = max_ngram
    stride = W + N  # room for an n-gram at the last word
    big = np.int64(1 << 40)
    rows_b, cols_s = np.nonzero(cand)
    wlen = np.bincount(rows_b * stride + wid[rows_b, cols_s], minlength=B * stride).reshape(B, stride)
    # beyond an item's own last word the n-gram does not exist: make it never fit
    wlen[np.arange(stride) >= n_words[:, None]] = big
    flat_wlen = wlen.ravel()

    # ---- shuffled visiting order of word starts and n draws ----
    base = _stream_base(keys[:, None], [_STREAM_ORDER, _STREAM_NGRAM, _STREAM_ACTION, _STREAM_RANDOM])  # (B, 4)
    u_order = _uniform_from(base[:, :1], np.arange(W, dtype=np.uint64))  # (B, W)
    in_item = np.arange(W) < n_words[:, None]  # (B, W): step k visits a word of the item
    u_order[~in_item] = 2.0
    order = np.argsort(u_order, axis=1)  # real words never tie (53-bit uniforms); padding order is irrelevant
    # step-major from here on, (W, B): a step's rows are contiguous
    order, in_item = np.ascontiguousarray(order.T), np.ascontiguousarray(in_item.T)
    thresholds = _ngram_thresholds(N)

    # Step k visits the k-th shuffled word of every item. What does not depend on the earlier steps' choices is
    # computed for CH steps at once, as (CH, B, N) arrays; a step's sums over n are batched (B, 1, N) @ (B, N, 1)
    # products (one call, no reduction along a short axis).
    covered = np.zeros(B * stride, dtype=np.uint8)  # flat (B, W + N), like flat_wlen: the word is chosen
    remaining = budget.reshape(B, 1, 1).copy()
    row_start = np.arange(B) * stride
    jn = np.arange(N)
    CH = 24  # steps whose choice-independent arrays are computed together (most batches finish in one chunk)
    for k0 in range(0, W, CH):
        k1 = min(W, k0 + CH)
        if not (in_item[k0] & (remaining[:, 0, 0] > 0)).any():
            break
        o = order[k0:k1]  # (CH, B): the word each step visits
        fit_rows = np.where(in_item[k0:k1], np.minimum(n_words - o, N) - 1, N)  # n-grams that fit, -1; N: none
        u_n = _uniform_from(base[:, 1], np.arange(k0, k1, dtype=np.uint64)[:, None])  # (CH, B): step k's draw
        drawn = u_n[:, :, None] >= thresholds[fit_rows]  # (CH, B, N): the lengths 1..n of the drawn n
        span = (row_start + o)[:, :, None] + jn  # (CH, B, N): the n-gram's words in covered / flat_wlen
        word_tokens = flat_wlen[span]  # tokens of the n-gram's n-th word
        # tokens of the 1..N-gram at each visited word, increasing in n; lengths above the drawn n never fit
        tok = np.where(drawn, np.cumsum(word_tokens, axis=2), big)[:, :, None, :]  # (CH, B, 1, N)
        word_tokens = word_tokens[..., None]  # (CH, B, N, 1)
        for c in range(k1 - k0):
            if c % 4 == 0 and not (in_item[k0 + c] & (remaining[:, 0, 0] > 0)).any():
                break
            # back-off: the n' <= n that fit the remaining budget form a prefix (B, 1, N); take the longest
            fits = tok[c] <= remaining
            sp = span[c]
            # skip the n-gram if it overlaps a chosen word: Σ_n fits·covered > 0
            fits &= (fits.view(np.uint8) @ covered[sp[:, :, None]]) == 0
            covered[sp[fits[:, 0]]] = 1
            remaining -= fits @ word_tokens[c]  # the tokens of the longest fitting n-gram (a prefix sum)

    chosen = covered[row_start[:, None] + np.maximum(wid, 0)].view(bool)  # (B, S): the token's word is chosen
    chosen &= cand
    at = np.flatnonzero(chosen)  # flat (B·S) positions of the chosen tokens, row-major
    r, c = np.divmod(at, S)
    u_act, u_rnd = _uniform_from(base[r, 2:].T, c)  # streams ACTION and RANDOM at counter = position
    rand_tok = random_ids[np.minimum((u_rnd * len(random_ids)).astype(np.int64), len(random_ids) - 1)]
    orig = ids.ravel()[at]
    out = ids.copy()
    out.ravel()[at] = np.where(u_act < 0.8, mask_token_id, np.where(u_act < 0.9, rand_tok, orig))
    labels = np.full((B, S), IGNORE_INDEX, dtype=np.int64)
    labels.ravel()[at] = orig
    return out, labels
