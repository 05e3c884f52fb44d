"""Tokenizers: training, loading, saving; ids agree with transformers.AutoTokenizer (the oracle) on every kind."""

from __future__ import annotations

import json
import shutil

import pytest

from litebert.errors import LitebertError
from litebert.tokenization import load_tokenizer, train_tokenizer

KINDS = ["sentencepiece", "wordpiece", "chinese"]

TEXTS = [
    "Hello World, the [MASK] is så nice.",
    "a [MASK] b",
    "  multiple   spaces\tand ``quotes'' ",
    "Café naïve São Paulo 123 @-@ <unk> x",
    "兰州公交集团:明起至8月底 Hello [MASK]。",
    "ǅemal ﬁ ① ½ x² İstanbul",
    "",
]


def _sample_lines(tiny, kind: str, n: int = 400) -> list[str]:
    path = tiny.clue_zh() if kind == "chinese" else tiny.wikitext_subset(60)
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return lines[:n]


@pytest.mark.parametrize("kind", KINDS)
def test_ids_match_transformers_autotokenizer(tiny, kind):
    transformers = pytest.importorskip("transformers")
    d = tiny.tokenizer(kind)
    ours = load_tokenizer(d)
    hf = transformers.AutoTokenizer.from_pretrained(str(d))
    assert ours.kind == kind
    assert len(hf) == ours.vocab_size
    for role in ("pad", "unk", "cls", "sep", "mask"):
        assert getattr(hf, f"{role}_token_id") == getattr(ours, f"{role}_token_id")
    texts = TEXTS + _sample_lines(tiny, kind)
    for t in texts:
        assert hf(t)["input_ids"] == ours.encode(t, add_special_tokens=True), t
    enc = hf("first sentence", "second one")
    mine = ours.encode_pair("first sentence", "second one")
    assert enc["input_ids"] == mine["input_ids"]
    # transformers 5's AlbertTokenizer drops token_type_ids unless tokenizer_config.json names them: a pair would
    # then reach the model as one segment (found by benchmarks/bench_infer.py on MRPC)
    assert enc["token_type_ids"] == mine["token_type_ids"]


@pytest.mark.parametrize("kind", KINDS)
def test_fast_batch_path_equals_pipeline(tiny, kind):
    tok = load_tokenizer(tiny.tokenizer(kind))
    texts = TEXTS + _sample_lines(tiny, kind, 2000) + ["x [MASK] y<unk>z [mask] [CLS][SEP]<pad>", "it''s a ``b``"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]  # warm cache


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_uncased_hello_world(tiny, kind):
    tok = load_tokenizer(tiny.tokenizer(kind))
    assert tok.encode("Hello World") == tok.encode("hello world")
    assert tok.encode_batch(["Hello World"]) == tok.encode_batch(["hello world"])


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_keep_accents(tiny, kind):
    stripped = load_tokenizer(tiny.tokenizer(kind))
    kept = load_tokenizer(tiny.tokenizer(kind, keep_accents=True))
    assert stripped.encode("så") == stripped.encode("sa")
    assert kept.encode("så") != kept.encode("sa")
    assert kept.keep_accents and not stripped.keep_accents


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_cased_tokenizer_keeps_case(tiny, kind):
    tok = load_tokenizer(tiny.tokenizer(kind, lowercase=False))
    assert not tok.do_lower_case
    assert tok.encode("Hello World") != tok.encode("hello world")


@pytest.mark.parametrize("kind", KINDS)
def test_mask_in_raw_text_is_one_token(tiny, kind):
    tok = load_tokenizer(tiny.tokenizer(kind))
    for text in ["the [MASK] is", "the[MASK]is", "[MASK]"]:
        ids = tok.encode(text)
        assert ids.count(tok.mask_token_id) == 1, (text, tok.convert_ids_to_tokens(ids))
        assert tok.encode_batch([text])[0] == ids


def test_sentencepiece_layout_is_albert(tiny):
    tok = load_tokenizer(tiny.tokenizer("sentencepiece"))
    ids = [tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id]
    assert ids == [0, 1, 2, 3, 4]
    assert tok.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]


def test_spiece_model_only_directory_loads(tiny, tmp_path):
    transformers = pytest.importorskip("transformers")
    src = tiny.tokenizer("sentencepiece")
    shutil.copy(src / "spiece.model", tmp_path / "spiece.model")
    a, b = load_tokenizer(src), load_tokenizer(tmp_path)
    hf = transformers.AlbertTokenizer.from_pretrained(str(tmp_path))
    for t in TEXTS + _sample_lines(tiny, "sentencepiece", 100):
        assert a.encode(t) == b.encode(t)
        assert hf(t)["input_ids"] == b.encode(t, add_special_tokens=True)
    b.save(tmp_path / "saved")
    assert load_tokenizer(tmp_path / "saved").encode("Hello there") == a.encode("Hello there")


def test_albert_zh_style_vocab_txt_loads(tmp_path):
    """albert_zh's vocab.txt layout: [PAD]=0, [unused1..99], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, chars."""
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 800)]
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += ["a", "b", "##b", "the", "."] + chars + ["##" + c for c in chars[:50]]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = load_tokenizer(tmp_path)
    assert tok.kind == "chinese"
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (
        0,
        100,
        101,
        102,
        103,
    )
    assert tok.vocab_size == len(vocab)
    ids = tok.encode("一丁 The [MASK] ab")
    assert tok.convert_ids_to_tokens(ids) == ["一", "丁", "the", "[MASK]", "a", "##b"]
    rnd = set(tok.random_replacement_ids().tolist())
    assert not rnd & {0, 100, 101, 102, 103} and 5 not in rnd  # no special or [unusedN] ids
    tok.save(tmp_path / "saved")
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "saved"))
    assert hf("一丁 The [MASK] ab")["input_ids"] == tok.encode("一丁 The [MASK] ab", add_special_tokens=True)


def test_tokenizer_json_only_directory_loads(tiny, tmp_path):
    src = tiny.tokenizer("wordpiece")
    shutil.copy(src / "tokenizer.json", tmp_path / "tokenizer.json")
    shutil.copy(src / "tokenizer_config.json", tmp_path / "tokenizer_config.json")
    a, b = load_tokenizer(src), load_tokenizer(tmp_path)
    assert a.encode("Hello there, world.") == b.encode("Hello there, world.")


def test_chinese_characters_are_single_tokens(tiny):
    tok = load_tokenizer(tiny.tokenizer("chinese"))
    toks = tok.tokenize("兰州公交集团")
    assert toks == list("兰州公交集团")


def test_bad_tokenizer_directories(tmp_path):
    with pytest.raises(LitebertError, match="not found"):
        load_tokenizer(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LitebertError, match=r"none of spiece\.model, vocab\.txt, tokenizer\.json"):
        load_tokenizer(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "spiece.model").write_bytes(b"not a model")
    with pytest.raises(LitebertError, match="SentencePiece"):
        load_tokenizer(tmp_path / "bad")
    (tmp_path / "nospecial").mkdir()
    (tmp_path / "nospecial" / "vocab.txt").write_text("a\nb\n")
    with pytest.raises(LitebertError, match="special tokens"):
        load_tokenizer(tmp_path / "nospecial")


def test_train_tokenizer_bad_input(tmp_path):
    with pytest.raises(LitebertError, match="not found"):
        train_tokenizer([tmp_path / "missing.txt"], "wordpiece", 100, tmp_path / "o")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(LitebertError, match="empty"):
        train_tokenizer([tmp_path / "empty.txt"], "wordpiece", 100, tmp_path / "o")
    with pytest.raises(LitebertError, match="--kind"):
        train_tokenizer([tmp_path / "empty.txt"], "bpe", 100, tmp_path / "o")
    # only invalid UTF-8: a clear error naming the first skipped line, on both backends; nothing written
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe one\n\xfe two\n")
    for kind in ("sentencepiece", "wordpiece"):
        with pytest.raises(LitebertError, match=rf"no text to train on; 2 line\(s\) were skipped .*{bad}:1"):
            train_tokenizer([bad], kind, 100, tmp_path / "o")
    assert not (tmp_path / "o").exists()
    # sentencepiece's own refusals are LitebertErrors too, not RuntimeError tracebacks
    text = tmp_path / "text.txt"
    text.write_text("".join(f"word{i} {chr(97 + i % 26)}{chr(65 + i % 20)} line.\n" for i in range(200)))
    with pytest.raises(LitebertError, match=r"SentencePiece training failed: .*vocab"):
        train_tokenizer([text], "sentencepiece", 10, tmp_path / "o")
    with pytest.raises(LitebertError, match=rf"--output {text} is the --corpus {text}"):
        train_tokenizer([text], "wordpiece", 100, text)
    (tmp_path / "f").write_text("x")
    with pytest.raises(LitebertError, match="is a file, not a directory"):
        train_tokenizer([text], "wordpiece", 100, tmp_path / "f")


def test_train_tokenizer_skips_the_empty_files_of_a_directory(tmp_path, capsys):
    from litebert.cli import main

    d = tmp_path / "corpus"
    d.mkdir()
    (d / "a.txt").write_text("")
    (d / "b.txt").write_text("".join(f"word{i} {chr(97 + i % 26)}{chr(65 + i % 20)} line.\n" for i in range(200)))
    assert main(["train-tokenizer", "--corpus", str(d), "--kind", "wordpiece", "--output", str(tmp_path / "tok")]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"; skipped 1 empty file: {d / 'a.txt'}")
    (d / "b.txt").write_text("  \n")
    with pytest.raises(LitebertError, match=r"no text to train on: every file is empty \(.*a\.txt, .*b\.txt\)$"):
        train_tokenizer([d], "wordpiece", 100, tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_train_tokenizer_refuses_a_non_empty_output(tmp_path):
    """A second tokenizer trained into the same directory would leave spiece.model beside vocab.txt (and loaders
    pick WordPiece): a non-empty --output is refused, nothing written."""
    text = tmp_path / "text.txt"
    text.write_text("".join(f"word{i} {chr(97 + i % 26)}{chr(65 + i % 20)} line.\n" for i in range(200)))
    tok = tmp_path / "tok"
    train_tokenizer([text], "sentencepiece", 60, tok)
    before = {p.name: p.read_bytes() for p in tok.iterdir()}
    assert "spiece.model" in before and "vocab.txt" not in before
    with pytest.raises(LitebertError, match=rf"--output {tok} is not empty \(holds .*spiece\.model"):
        train_tokenizer([text], "wordpiece", 100, tok)
    assert {p.name: p.read_bytes() for p in tok.iterdir()} == before
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_settings.json").write_text('{"command": "finetune"}')
    with pytest.raises(LitebertError, match=r"is not empty \(holds run_settings\.json\)"):
        train_tokenizer([text], "wordpiece", 100, run)
    assert [p.name for p in run.iterdir()] == ["run_settings.json"]
    with pytest.raises(LitebertError, match="is inside the --corpus"):
        train_tokenizer([tmp_path], "wordpiece", 100, tmp_path / "new")
    (tmp_path / "empty").mkdir()
    assert train_tokenizer([text], "wordpiece", 100, tmp_path / "empty").vocab_size > 5


def test_train_tokenizer_cli_reports_skipped_lines_and_small_vocab(tmp_path, capsys):
    from litebert.cli import main

    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"the cat sat on the mat .\nthe dog sat too .\n\xff broken\n\nanother doc here .\n")
    assert (
        main(
            [
                "train-tokenizer",
                "--corpus",
                str(corpus),
                "--kind",
                "wordpiece",
                "--vocab-size",
                "5000",
                "--output",
                str(tmp_path / "tok"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "(2 documents, 3 sentences)" in out and "fewer ids than --vocab-size 5000" in out
    assert f"skipped 1 invalid line(s) (first: {corpus}:3)" in out


def test_saved_directory_runs_in_fill_mask_pipeline(tiny, tmp_path):
    """The files Tokenizer.save writes are what final/ holds: they must work in transformers' fill-mask."""
    transformers = pytest.importorskip("transformers")
    import torch

    tok = load_tokenizer(tiny.tokenizer("sentencepiece"))
    cfg = transformers.AlbertConfig(
        vocab_size=tok.vocab_size,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
    )
    torch.manual_seed(0)
    transformers.AlbertForMaskedLM(cfg).save_pretrained(tmp_path)
    tok.save(tmp_path)
    fill = transformers.pipeline("fill-mask", model=str(tmp_path), tokenizer=str(tmp_path))
    out = fill(f"the game is a {tok.mask_token} of the series .")
    assert len(out) == 5 and all("token" in o for o in out)
    assert tiny.root.exists()


# ---------------------------------------------------------------------------------------------- defects (issue 12)
def _wordpiece_dir(path, tokens, config=None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    if config is not None:
        (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["wordpiece", "chinese"])
def test_c1_control_characters_encode_alike_on_every_path(tmp_path, kind):
    """U+0085 (NEL) is whitespace to Python's str.split() but a control character that BERT's normalizer deletes:
    the batch path (prepare, fine-tuning) must give the pipeline's ids, which transformers' tokenizer gives too."""
    transformers = pytest.importorskip("transformers")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "ab", "##b", "c"]
    d = _wordpiece_dir(tmp_path / "tok", tokens, {"litebert_kind": kind})
    tok = load_tokenizer(d)
    assert tok.kind == kind
    tok.save(d)
    hf = transformers.AutoTokenizer.from_pretrained(str(d))
    for text in ["a\x85b", "c a\x85b\x9fc", "a\x80b c"]:
        expected = hf(text, add_special_tokens=False)["input_ids"]
        assert tok.encode(text) == expected, text
        assert tok.encode_batch([text, "a b"]) == [expected, [5, 6]], text
    assert tok.encode("a\x85b") == [7]  # one word "ab": the control character is deleted, not a space


def test_unigram_tokenizer_json_keeps_unk_id_zero(tmp_path):
    """A Unigram tokenizer.json with unk_id 0 (SentencePiece's default layout) must encode unknown text as id 0;
    the tokenizers library itself, reading the same file, is the oracle."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import pre_tokenizers
    from tokenizers.models import Unigram

    pieces = ["<unk>", "<pad>", "[CLS]", "[SEP]", "[MASK]", "▁a", "▁b", "▁", "a", "b"]
    backend = Backend(Unigram([(p, -1.0 - i) for i, p in enumerate(pieces)], unk_id=0, byte_fallback=False))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    d = tmp_path / "tok"
    d.mkdir()
    backend.save(str(d / "tokenizer.json"))
    assert json.loads((d / "tokenizer.json").read_text())["model"]["unk_id"] == 0
    tok = load_tokenizer(d)
    assert tok.kind == "sentencepiece" and tok.unk_token_id == 0
    expected = Backend.from_file(str(d / "tokenizer.json")).encode("a z").ids
    assert expected == [5, 7, 0]  # "▁a", "▁", then z: unknown
    assert tok.encode("a z") == expected


def test_sentencepiece_vocab_given_as_vocab_txt_is_refused(tmp_path):
    """A SentencePiece vocabulary saved as vocab.txt, with tokenizer_config.json naming <pad>/<unk>, would load as
    WordPiece and encode most words as the unknown token; the loader must refuse it and name the loader that fits."""
    pieces = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]", "▁the", "▁cat", "▁sat", "▁on", "▁mat", "s", "▁"]
    d = _wordpiece_dir(tmp_path / "tok", pieces, {"pad_token": "<pad>", "unk_token": "<unk>"})
    with pytest.raises(
        LitebertError,
        match=r"vocab\.txt: a SentencePiece vocabulary \(6 pieces start with '▁', "
        r"0 with '##' and the special tokens <pad>, <unk>\).*spiece\.model",
    ):
        load_tokenizer(d)
    # the same words as a real WordPiece vocabulary still load
    tok = load_tokenizer(
        _wordpiece_dir(tmp_path / "wp", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s"])
    )
    assert tok.encode("the cats sat") == [5, 6, 8, 7]


def test_wordpiece_keeps_every_frequent_character_of_chinese_text(tmp_path):
    """WordPiece on text with more than 1,000 distinct characters (a CJK corpus) keeps every character that is not
    in the rarest 0.005 % of occurrences (SentencePiece's default character_coverage), where a fixed
    ``limit_alphabet=1000`` (transformers' BERT recipe) turned most Chinese characters into [UNK]."""
    chars = [chr(0x4E00 + i) for i in range(1500)]  # 1,500 distinct CJK ideographs, each 3 times
    lines = ["".join(chars[i : i + 30]) for i in range(0, 1500, 30)] * 3
    lines.append("靖")  # seen once: 1 of 4,501 occurrences (0.02 %) is above the 0.005 % tail, so it is kept too
    corpus = tmp_path / "zh.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = train_tokenizer([corpus], "wordpiece", 3000, tmp_path / "tok")
    pieces = tok.tokenize("".join(chars) + "靖")
    assert len(pieces) == 1501 and "[UNK]" not in pieces
    assert tok.vocab_size <= 3000


def test_wordpiece_alphabet_fits_the_vocabulary(tmp_path):
    """More distinct characters than ids: the alphabet is cut to the most frequent ones and the vocabulary stays
    within --vocab-size (the trainer would otherwise keep the whole alphabet)."""
    chars = [chr(0x4E00 + i) for i in range(600)]
    lines = ["".join(chars[:100])] * 5 + ["".join(chars[100:])]  # the first 100 characters 5 times as frequent
    corpus = tmp_path / "zh.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = train_tokenizer([corpus], "wordpiece", 200, tmp_path / "tok")
    assert tok.vocab_size <= 200
    assert "[UNK]" not in tok.tokenize("".join(chars[:100]))


@pytest.mark.parametrize("kind", ["wordpiece", "chinese"])
def test_wordpiece_training_is_repeatable(tmp_path, tiny, kind):
    """Two trainings on the same corpus give the same vocab.txt, byte for byte. The tokenizers trainer numbers
    the ``##`` pieces in the order of a hash map, different in every process, and those numbers break ties between
    merges of equal count: ids, and even the set of pieces, changed from run to run."""
    text = (tiny.wikitext_train() if kind == "wordpiece" else tiny.news_zh()).read_bytes()[:200_000]
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(text[: text.rindex(b"\n") + 1])
    vocab_size = 1000 if kind == "wordpiece" else 1600
    first, second = (train_tokenizer([corpus], kind, vocab_size, tmp_path / f"tok{i}") for i in (1, 2))
    one, two = ((tmp_path / f"tok{i}" / "vocab.txt").read_bytes() for i in (1, 2))
    assert one == two
    assert first.vocab_size == second.vocab_size == (vocab_size if kind == "wordpiece" else len(one.split()))
    assert one.decode().split("\n")[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
