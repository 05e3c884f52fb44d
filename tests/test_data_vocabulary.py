"""The data manifest's vocabulary fingerprint: data or a model directory of another tokenizer with the same vocabulary
size is refused (issue 12, defect 2); data prepared before the fingerprint existed is accepted with a warning."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import torch

from litebert.cli import main
from litebert.config import AlbertConfig
from litebert.data import PrepareConfig, check_same_vocabulary, prepare, read_manifest
from litebert.errors import LitebertError
from litebert.modeling import AlbertForPreTraining
from litebert.tokenization import load_tokenizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "rug", "and", "then", "slept", "."]
DOC = "the cat sat on the mat .\nthen the dog ran .\nthe cat and the dog slept on a rug .\n"


@pytest.fixture(scope="module")
def two_tokenizers_data(tmp_path_factory):
    """Two WordPiece tokenizers with the same 18 tokens in another order, and the same corpus prepared with each."""
    root = tmp_path_factory.mktemp("vocab")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join([DOC] * 40), encoding="utf-8")
    out = {}
    for name, words in (("a", WORDS), ("b", WORDS[::-1])):
        tok_dir = root / f"tok_{name}"
        tok_dir.mkdir()
        (tok_dir / "vocab.txt").write_text("".join(t + "\n" for t in SPECIALS + words), encoding="utf-8")
        prepare(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(tok_dir),
                output=str(root / f"data_{name}"),
                max_seq_length=16,
                max_predictions_per_seq=3,
                seed=1,
                progress=False,
            )
        )
        out[name] = (tok_dir, root / f"data_{name}")
    return out


def test_manifest_stores_the_sha256_of_the_ordered_vocabulary(two_tokenizers_data):
    tok_dir, data = two_tokenizers_data["a"]
    expected = hashlib.sha256("".join(t + "\n" for t in SPECIALS + WORDS).encode()).hexdigest()  # vocab.txt's bytes
    assert read_manifest(data)["tokenizer"]["vocab_sha256"] == expected
    assert load_tokenizer(tok_dir).vocab_fingerprint() == expected
    other = read_manifest(two_tokenizers_data["b"][1])["tokenizer"]
    assert other["vocab_size"] == 18 and other["vocab_sha256"] != expected


def _pretrain(data, out, *extra):
    return main(
        [
            "pretrain",
            "--data",
            str(data),
            "--model-config",
            "albert-debug",
            "--output",
            str(out),
            "--max-steps",
            "1",
            "--batch-size",
            "2",
            "--no-progress-bar",
            *map(str, extra),
        ]
    )


def test_eval_data_of_another_tokenizer_is_refused_before_training(two_tokenizers_data, tmp_path, capsys):
    (_, data_a), (_, data_b) = two_tokenizers_data["a"], two_tokenizers_data["b"]
    assert _pretrain(data_a, tmp_path / "run", "--eval-data", data_b) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert f"--eval-data {data_b} was prepared with another tokenizer than --data {data_a}" in err
    assert "same vocab_size 18 but different tokens" in err
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "final").exists()


def test_init_from_a_model_of_another_tokenizer_is_refused(two_tokenizers_data, tmp_path, capsys):
    (tok_a, data_a), (tok_b, _) = two_tokenizers_data["a"], two_tokenizers_data["b"]
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig.from_preset("albert-debug", vocab_size=18))
    for name, tok_dir in (("same", tok_a), ("other", tok_b)):
        model.save_pretrained(tmp_path / name)
        load_tokenizer(tok_dir).save(tmp_path / name)
    assert _pretrain(data_a, tmp_path / "bad", "--init-from", tmp_path / "other") == 2
    err = capsys.readouterr().err
    assert f"--data {data_a} was prepared with another tokenizer than --init-from {tmp_path / 'other'}" in err
    assert _pretrain(data_a, tmp_path / "good", "--init-from", tmp_path / "same") == 0  # the same tokens: accepted


def test_data_prepared_without_a_fingerprint_is_accepted_with_a_warning(two_tokenizers_data, tmp_path):
    (_, data_a), (_, data_b) = two_tokenizers_data["a"], two_tokenizers_data["b"]
    old = tmp_path / "old"
    shutil.copytree(data_b, old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["tokenizer"]["vocab_sha256"]  # as written before the fingerprint existed
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(
        UserWarning,
        match=r"cannot check that --eval-data .* use the same tokens, only the same "
        r"vocab_size: --eval-data .*old has no vocabulary fingerprint",
    ):
        check_same_vocabulary(read_manifest(old), read_manifest(data_a), f"--eval-data {old}", "--data a")
    # a different vocabulary size is still refused without fingerprints
    manifest["tokenizer"]["vocab_size"] = 19
    with pytest.raises(LitebertError, match="vocab_size 19 vs 18"):
        check_same_vocabulary(manifest, read_manifest(data_a), "--eval-data old", "--data a")
