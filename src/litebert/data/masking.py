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
    with np.errstate(over="ignore"):
        base = _mix(keys ^ (np.asarray(stream, dtype=np.uint64) * _M2))
        x = _mix(base + (np.asarray(counters, dtype=np.uint64) + np.uint64(1)) * _GOLDEN)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def ngram_probs(max_ngram: int) -> np.ndarray:
    """``p(n) ∝ 1/n`` for n = 1..max_ngram (3 → 6/11, 3/11, 2/11)."""
    p = 1.0 / np.arange(1, max_ngram + 1)
    return p / p.sum()


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
    ids = np.asarray(input_ids, dtype=np.int64)
    B, S = ids.shape
    lengths = np.asarray(lengths, dtype=np.int64)
    pos = np.arange(S)
    special_ids = np.asarray(special_ids)
    if special_ids.dtype == bool:  # a lookup table over the vocabulary
        is_special = special_ids[ids]
    else:
        is_special = np.isin(ids, special_ids)
    cand = (pos[None, :] < lengths[:, None]) & ~is_special
    prev_cand = np.zeros_like(cand)
    prev_cand[:, 1:] = cand[:, :-1]
    starts = cand & ((np.asarray(word_start) != 0) | ~prev_cand)
    budget = np.minimum(max_predictions_per_seq, np.maximum(1, np.rint(lengths * masked_lm_prob))).astype(np.int64)
    if masked_lm_prob <= 0:
        return ids.copy(), np.full_like(ids, IGNORE_INDEX)

    # ---- words: index per token, length per word ----
    wid = np.cumsum(starts, axis=1) - 1  # (B, S) word index of each candidate token
    n_words = starts.sum(axis=1)  # (B,)
    W = max(int(n_words.max()) if B else 0, 1)
    N = max_ngram
    rows_b, cols_s = np.nonzero(cand)
    wlen = np.bincount(rows_b * W + wid[rows_b, cols_s], minlength=B * W).reshape(B, W)
    big = np.int64(1 << 40)
    cum = np.zeros((B, W + N + 1), dtype=np.int64)
    cum[:, 1 : W + 1] = np.cumsum(wlen, axis=1)
    cum[:, W + 1 :] = big
    # beyond an item's own last word the n-gram does not exist: make it never fit
    w_idx = np.arange(W + N + 1)
    cum = np.where(w_idx[None, :] <= n_words[:, None], cum, big)

    # ---- shuffled visiting order of word starts and n draws ----
    streams = np.array([_STREAM_ORDER, _STREAM_NGRAM], dtype=np.uint64)[None, :, None]
    u = _uniform_at(keys[:, None, None], streams, np.arange(W, dtype=np.uint64)[None, None, :])  # (B, 2, W)
    u_order, u_n = u[:, 0], u[:, 1]
    u_order[np.arange(W)[None, :] >= n_words[:, None]] = 2.0
    order = np.argsort(u_order, axis=1)  # real words never tie (53-bit uniforms); padding order is irrelevant
    # cumulative p(n) restricted to the first m lengths, for m = 1..N: row m-1
    p = ngram_probs(N)
    cum_tables = np.full((N, N), 2.0)
    for m in range(1, N + 1):
        c = np.cumsum(p[:m] / p[:m].sum())
        cum_tables[m - 1, : m - 1] = c[: m - 1]

    rows = np.arange(B)
    jn = np.arange(N)
    stride = W + N
    cstride = W + N + 1
    cum_flat = cum.ravel()
    in_item = np.arange(W)[None, :] < n_words[:, None]
    covered = np.zeros(B * stride, dtype=bool)
    remaining = budget.copy()
    CH = 24  # steps whose choice-independent arrays are computed together (most batches finish in one chunk)
    for k0 in range(0, W, CH):
        k1 = min(W, k0 + CH)
        if not (in_item[:, k0] & (remaining > 0)).any():
            break
        o = order[:, k0:k1]
        navail = np.clip(n_words[:, None] - o, 1, N)
        n_draw = 1 + (u_n[:, k0:k1, None] >= cum_tables[navail - 1]).sum(axis=2)  # drawn n (words)
        cbase = rows[:, None] * cstride + o  # flat index of cum at the n-gram's first word
        # tokens of the 1..N-gram starting at each visited word: (B, CH, N), increasing in n
        tok = cum_flat[cbase[:, :, None] + 1 + jn] - cum_flat[cbase][:, :, None]
        # lengths above the drawn n, and steps past an item's last word, are never taken
        tok = np.where((jn < n_draw[:, :, None]) & in_item[:, k0:k1, None], tok, big)
        span = (rows[:, None] * stride + o)[:, :, None] + jn  # flat indices of the n-gram's words
        for c in range(k1 - k0):
            if c % 4 == 0 and not (in_item[:, k0 + c] & (remaining > 0)).any():
                break
            t = tok[:, c]
            # back-off: the n' <= n that fit the remaining budget form a prefix; take the longest
            fits = t <= remaining[:, None]
            sp = span[:, c]
            fits &= ~(covered[sp] & fits).any(axis=1, keepdims=True)  # skip if it overlaps a chosen word
            covered[sp[fits]] = True
            remaining -= (t * fits).max(axis=1)

    chosen = cand & covered.ravel()[rows[:, None] * stride + np.clip(wid, 0, W - 1)]
    r, c = np.nonzero(chosen)
    streams = np.array([_STREAM_ACTION, _STREAM_RANDOM], dtype=np.uint64)[:, None]
    u_act, u_rnd = _uniform_at(keys[r][None, :], streams, c[None, :])
    rand_tok = random_ids[np.minimum((u_rnd * len(random_ids)).astype(np.int64), len(random_ids) - 1)]
    orig = ids[r, c]
    out = ids.copy()
    out[r, c] = np.where(u_act < 0.8, mask_token_id, np.where(u_act < 0.9, rand_tok, orig))
    labels = np.full_like(ids, IGNORE_INDEX)
    labels[r, c] = orig
    return out, labels
