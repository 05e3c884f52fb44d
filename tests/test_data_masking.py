"""n-gram whole-word masking (docs/algorithms.md §3): the vectorized batch version against a plain per-item reference of the
official algorithm, and the statistics docs/algorithms.md §3 gives as test bounds."""

from __future__ import annotations

import numpy as np
import pytest

from litebert.data.masking import (
    _STREAM_ACTION,
    _STREAM_NGRAM,
    _STREAM_ORDER,
    _STREAM_RANDOM,
    _uniform,
    mask_batch,
    mask_keys,
    ngram_probs,
)

CLS, SEP, PAD, MASK = 2, 3, 0, 4
SPECIAL = np.array([PAD, CLS, SEP, MASK])
RANDOM_IDS = np.arange(5, 1000)


def reference_mask(ids, word_start, length, key, prob=0.15, P=20, N=3):
    """google-research/albert create_masked_lm_predictions, one item, one word at a time (the slow reference)."""
    ids = list(ids[:length])
    cand_words = []
    prev_special = True
    for i, t in enumerate(ids):
        if t in SPECIAL:
            prev_special = True
            continue
        if word_start[i] or prev_special or not cand_words:
            cand_words.append([i])
        else:
            cand_words[-1].append(i)
        prev_special = False
    budget = min(P, max(1, int(np.rint(length * prob))))
    W = len(cand_words)
    keys = np.array([key], dtype=np.uint64)
    u_order = _uniform(keys, _STREAM_ORDER, max(W, 1))[0][:W]
    order = np.argsort(u_order, kind="stable")
    u_n = _uniform(keys, _STREAM_NGRAM, max(W, 1))[0]
    p = ngram_probs(N)
    covered_words: set[int] = set()
    count = 0
    for k, w in enumerate(order):
        if count >= budget:
            break
        navail = min(N, W - w)
        c = np.cumsum(p[:navail] / p[:navail].sum())
        n = 1 + int((u_n[k] >= c[:-1]).sum())

        def size(m, w=w):
            return sum(len(cand_words[w + j]) for j in range(m))

        while n > 0 and count + size(n) > budget:
            n -= 1
        if n == 0:
            continue
        if any(w + j in covered_words for j in range(n)):
            continue
        covered_words.update(w + j for j in range(n))
        count += size(n)
    chosen = sorted(i for w in covered_words for i in cand_words[w])
    S = len(word_start)
    u_act = _uniform(keys, _STREAM_ACTION, S)[0]
    u_rnd = _uniform(keys, _STREAM_RANDOM, S)[0]
    out = list(ids) + [PAD] * (S - length)
    labels = [-100] * S
    for i in chosen:
        labels[i] = ids[i]
        if u_act[i] < 0.8:
            out[i] = MASK
        elif u_act[i] < 0.9:
            out[i] = int(RANDOM_IDS[min(int(u_rnd[i] * len(RANDOM_IDS)), len(RANDOM_IDS) - 1)])
    return out, labels


def random_batch(rng, B=64, S=128, p_cont=0.3, min_len=8):
    lengths = rng.integers(min_len, S + 1, size=B)
    ids = np.full((B, S), PAD, np.int64)
    ws = np.zeros((B, S), np.uint8)
    for b, n in enumerate(lengths):
        la = int(rng.integers(1, n - 2))
        body = rng.integers(5, 1000, size=n)
        body[0], body[la + 1], body[n - 1] = CLS, SEP, SEP
        ids[b, :n] = body
        ws[b, :n] = rng.random(n) >= p_cont
        ws[b, [0, la + 1, n - 1]] = 0
    return ids, ws, lengths


def run(ids, ws, lengths, keys, **kw):
    return mask_batch(ids, ws, lengths, keys, mask_token_id=MASK, special_ids=SPECIAL, random_ids=RANDOM_IDS, **kw)


@pytest.mark.parametrize("max_ngram", [1, 2, 3, 4])
def test_vectorized_equals_reference(max_ngram):
    rng = np.random.default_rng(max_ngram)
    ids, ws, lengths = random_batch(rng, B=48)
    keys = mask_keys(7, 1, np.arange(48))
    out, labels = run(ids, ws, lengths, keys, max_ngram=max_ngram)
    for b in range(48):
        ref_out, ref_labels = reference_mask(ids[b], ws[b], int(lengths[b]), int(keys[b]), N=max_ngram)
        assert out[b].tolist() == ref_out, b
        assert labels[b].tolist() == ref_labels, b


def test_item_mask_independent_of_batch_and_padding():
    rng = np.random.default_rng(0)
    ids, ws, lengths = random_batch(rng, B=16)
    keys = mask_keys(3, 0, np.arange(16))
    out, labels = run(ids, ws, lengths, keys)
    for b in (0, 5, 15):
        n = int(lengths[b])
        o1, l1 = run(ids[b : b + 1, :n], ws[b : b + 1, :n], lengths[b : b + 1], keys[b : b + 1])
        assert o1[0].tolist() == out[b, :n].tolist() and l1[0].tolist() == labels[b, :n].tolist()
    o2, _ = run(ids, ws, lengths, mask_keys(3, 1, np.arange(16)))
    assert not np.array_equal(o2, out)  # another epoch, other masks


def test_predicted_count_rule_and_specials_never_predicted():
    rng = np.random.default_rng(1)
    ids, ws, lengths = random_batch(rng, B=400, p_cont=0.0)  # every token its own word: enough words always
    _, labels = run(ids, ws, lengths, mask_keys(0, 0, np.arange(400)))
    counts = (labels != -100).sum(1)
    expected = np.minimum(20, np.maximum(1, np.rint(lengths * 0.15))).astype(int)
    assert counts.tolist() == expected.tolist()
    assert not np.isin(ids[labels != -100], SPECIAL).any()
    pos = np.arange(ids.shape[1])[None, :]
    assert ((labels == -100) | (pos < lengths[:, None])).all()
    # with multi-piece words the count never exceeds the rule and almost always reaches it
    ids, ws, lengths = random_batch(rng, B=400, p_cont=0.3)
    _, labels = run(ids, ws, lengths, mask_keys(0, 0, np.arange(400)))
    counts = (labels != -100).sum(1)
    expected = np.minimum(20, np.maximum(1, np.rint(lengths * 0.15))).astype(int)
    assert (counts <= expected).all() and (counts == expected).mean() > 0.9


def test_80_10_10_and_random_tokens_not_special():
    rng = np.random.default_rng(2)
    ids, ws, lengths = random_batch(rng, B=1600, S=128, min_len=100)
    out, labels = run(ids, ws, lengths, mask_keys(5, 0, np.arange(1600)))
    sel = labels != -100
    n = sel.sum()
    assert n >= 20_000
    masked = (out[sel] == MASK).mean()
    kept = (out[sel] == ids[sel]).mean()
    random = 1 - masked - kept
    # a random replacement can equal the original token (1/995): counted as "kept"
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02 and abs(random - 0.1) < 0.02
    replaced = out[sel][(out[sel] != MASK) & (out[sel] != ids[sel])]
    assert not np.isin(replaced, SPECIAL).any()


def test_whole_words_only():
    rng = np.random.default_rng(3)
    ids, ws, lengths = random_batch(rng, B=300, p_cont=0.4)
    _, labels = run(ids, ws, lengths, mask_keys(9, 0, np.arange(300)))
    for b in range(300):
        n = int(lengths[b])
        sel = labels[b, :n] != -100
        special = np.isin(ids[b, :n], SPECIAL)
        for i in range(1, n):
            cont = not ws[b, i] and not special[i] and not special[i - 1]
            if cont:  # a continuation piece is chosen exactly when the piece before it (same word) is
                assert sel[i] == sel[i - 1], (b, i)


def _run_lengths(sel_row):
    runs, cur = [], 0
    for s in sel_row:
        if s:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    if cur:
        runs.append(cur)
    return runs


def test_ngram_run_lengths_follow_p_n():
    """Whole-word text at S=128: about 54% runs of 1 word, 27% of 2, 16% of 3 (docs/algorithms.md §3)."""
    rng = np.random.default_rng(4)
    B = 2000
    ids, ws, lengths = random_batch(rng, B=B, S=128, p_cont=0.0, min_len=128)
    _, labels = run(ids, ws, lengths, mask_keys(11, 0, np.arange(B)))
    runs = np.array([r for b in range(B) for r in _run_lengths(labels[b] != -100)])
    share = [(runs == k).mean() for k in (1, 2, 3)]
    assert abs(share[0] - 0.54) < 0.04 and abs(share[1] - 0.27) < 0.04 and abs(share[2] - 0.16) < 0.04, share
    # max_ngram 1: plain whole-word masking, chosen words independent; runs of 2+ only by adjacency
    _, labels1 = run(ids, ws, lengths, mask_keys(11, 0, np.arange(B)), max_ngram=1)
    runs1 = np.array([r for b in range(B) for r in _run_lengths(labels1[b] != -100)])
    assert (runs1 == 1).mean() > 0.8
    assert ngram_probs(3).tolist() == pytest.approx([6 / 11, 3 / 11, 2 / 11])


def test_zero_probability_masks_nothing():
    rng = np.random.default_rng(5)
    ids, ws, lengths = random_batch(rng, B=4)
    out, labels = run(ids, ws, lengths, mask_keys(0, 0, np.arange(4)), masked_lm_prob=0.0)
    assert (labels == -100).all() and np.array_equal(out, ids)
