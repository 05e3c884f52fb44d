"""Classification rows laid out flat (``litebert.finetune.data.Encoded``): the same rows, truncation and batches as
the row-by-row layout they replace, whose oracle here is written out one row and one token at a time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from litebert.finetune import DataOptions
from litebert.finetune.data import Encoded, EncodedDataset, LabelSpace, PadCollator, encode_examples, pair_keep
from litebert.finetune.readers import Example


def _cut_one_at_a_time(a: list, b: list, budget: int) -> tuple[list, list]:
    """google-research/bert ``_truncate_seq_pair``: pop from the longer text, the second on a tie."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()
    return a, b


def _rows_one_by_one(examples, tok, max_seq_length):
    """``[CLS] a [SEP] (b [SEP])`` per example from ``tok.encode`` of each text alone."""
    ids, types, truncated, longest = [], [], 0, 0
    cls, sep = tok.cls_token_id, tok.sep_token_id
    for ex in examples:
        a = tok.encode(ex.text)
        if ex.text_pair is None:
            full = len(a) + 2
            row = [cls, *a[: max_seq_length - 2], sep]
            kinds = [0] * len(row)
        else:
            b = tok.encode(ex.text_pair)
            full = len(a) + len(b) + 3
            a, b = _cut_one_at_a_time(a, b, max_seq_length - 3)
            row = [cls, *a, sep, *b, sep]
            kinds = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        truncated += full > max_seq_length
        longest = max(longest, full)
        ids.append(row)
        types.append(kinds)
    return ids, types, truncated, longest


@pytest.fixture(scope="module")
def tok(tiny):
    from litebert.tokenization import load_tokenizer

    return load_tokenizer(tiny.tokenizer("sentencepiece"))


@pytest.mark.parametrize("task, path", [("sst2", "glue/SST-2/dev.tsv"), ("mrpc", "glue/MRPC/dev.tsv")])
def test_flat_rows_equal_the_row_by_row_layout(shared_data, tok, task, path):
    read = DataOptions(task=task).read(shared_data / path, require_label=True)
    space = LabelSpace("single_label", ("0", "1"))
    for max_seq_length in (8, 9, 16, 33, 128):
        enc = encode_examples(read.examples, tok, max_seq_length, space, read.path)
        ids, types, truncated, longest = _rows_one_by_one(read.examples, tok, max_seq_length)
        assert enc.input_ids == ids
        assert enc.token_type_ids == types
        assert (enc.truncated, enc.longest) == (truncated, longest)
        assert enc.lengths.tolist() == [len(r) for r in ids]
        assert enc.targets == [int(ex.label) for ex in read.examples]
        if max_seq_length == 16:
            assert truncated > 100  # the cut is exercised
    assert len(enc) == len(read.examples) and enc.flat_ids.dtype == np.int32


def test_pair_lengths_in_closed_form_equal_the_token_by_token_cut():
    rows = np.array([(a, b) for a in range(25) for b in range(25)])
    for budget in range(40):
        keep_a, keep_b = pair_keep(rows[:, 0], rows[:, 1], budget)
        want = [tuple(map(len, _cut_one_at_a_time(range(a), range(b), budget))) for a, b in rows.tolist()]
        assert list(zip(keep_a.tolist(), keep_b.tolist())) == want


def _examples(n, seed=0, pairs=True):
    rng = np.random.default_rng(seed)
    words = ["the", "film", "is", "a", "good", "bad", "story", "of", "love", "[MASK]", "Ünïcode", "x"]
    text = lambda: " ".join(rng.choice(words, rng.integers(0, 30)))  # noqa: E731
    return [
        Example(i, text(), text() if pairs and i % 3 else None, str(i % 2), i + 2) for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "problem_type, labels",
    [("single_label", ("0", "1")), ("regression", ()), ("multi_label", ("0", "1"))],
)
def test_a_batch_gathered_from_flat_ids_equals_the_collators(tok, problem_type, labels):
    space = LabelSpace(problem_type, labels)
    enc = encode_examples(_examples(40), tok, 24, space)
    items = EncodedDataset(enc)
    collate = PadCollator(tok.pad_token_id, problem_type)
    dtype = np.int64 if problem_type == "single_label" else np.float32
    targets = np.asarray(enc.targets, dtype=dtype)
    for rows in (np.arange(40), np.array([5, 3, 39, 0]), np.array([7])):
        got = enc.batch(rows, tok.pad_token_id, targets)
        want = collate([items[int(i)] for i in rows])
        assert got.keys() == want.keys()
        for k in want:
            assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), k
    assert enc.batch(np.array([1, 2]), tok.pad_token_id)["attention_mask"].sum() == enc.lengths[1:3].sum()


def test_chunks_concatenated_equal_the_whole_file(tok):
    space = LabelSpace("single_label", ("0", "1"))
    exs = _examples(50, seed=1)
    whole = encode_examples(exs, tok, 20, space)
    parts = [encode_examples(exs[i : i + 16], tok, 20, space) for i in range(0, 50, 16)]
    joined = Encoded.concat(parts)
    for name in ("flat_ids", "offsets", "type_starts"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name))
    assert (joined.targets, joined.truncated, joined.longest) == (whole.targets, whole.truncated, whole.longest)
    assert Encoded.concat([encode_examples(exs[:3], tok, 20), parts[0]]).targets is None


def test_rows_from_lists_round_trip_and_refuse_mixed_types():
    ids, types = [[2, 7, 3], [2, 9, 3, 8, 3], [2, 3]], [[0, 0, 0], [0, 0, 0, 1, 1], [0, 0]]
    enc = Encoded.from_lists(ids, types)
    assert enc.input_ids == ids and enc.token_type_ids == types and enc.type_starts.tolist() == [3, 3, 2]
    assert EncodedDataset(enc)[-1] == {"input_ids": [2, 3], "token_type_ids": [0, 0]}
    with pytest.raises(IndexError):
        EncodedDataset(enc)[3]
    with pytest.raises(ValueError, match="row 1: token_type_ids must be 0s then 1s"):
        Encoded.from_lists(ids, [[0, 0, 0], [0, 1, 0, 1, 1], [0, 0]])


def test_a_length_too_short_for_a_pair_is_one_error(tok):
    """A pair needs 5 positions ([CLS] a [SEP] b [SEP] with a token of each), a single text 3: before, 4 was
    accepted for pairs (one of the two texts got no token) and 3 refused for single texts."""
    from pathlib import Path

    from litebert.errors import LitebertError

    with pytest.raises(LitebertError) as exc:
        encode_examples(_examples(3), tok, 4, path=Path("dev.tsv"))
    assert str(exc.value) == (
        "max_seq_length 4 is too small: [CLS] a [SEP] b [SEP] needs at least 5 positions, one token of each text "
        "(dev.tsv:3 is a sentence pair)"
    )
    assert np.diff(encode_examples(_examples(3), tok, 5).offsets).max() <= 5
    with pytest.raises(LitebertError) as exc:
        encode_examples(_examples(3, pairs=False), tok, 2)
    assert str(exc.value) == (
        "max_seq_length 2 is too small: [CLS] text [SEP] needs at least 3 positions, one token of each text"
    )
    assert np.diff(encode_examples(_examples(3, pairs=False), tok, 3).offsets).max() <= 3
