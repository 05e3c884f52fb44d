"""Fixtures shared by every test module: the public data, the TF fixtures, and one set of tiny, cached builders
(corpus subsets, trained tokenizers, prepared data, a tiny model directory) that the data, tokenizer, pretraining
and fine-tuning tests all use."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import torch
from _fake_hub import fake_hub  # noqa: F401  (the `fake_hub` fixture: a local HTTP Hub, tests/_fake_hub.py)

from litebert.config import AlbertConfig
from litebert.data import PrepareConfig, prepare
from litebert.modeling import AlbertForPreTraining
from litebert.paths import data_dir, fixtures_dir
from litebert.tokenization import train_tokenizer

# Tests run on 2 cores; keep torch from oversubscribing them and make runs repeatable.
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def shared_data():
    """The public data directory (LITEBERT_DATA_DIR, default ../shared/data); skips when absent."""
    path = data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set LITEBERT_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def tf_fixtures():
    """The TensorFlow checkpoint fixtures (../shared/fixtures/tf); skips when absent."""
    path = fixtures_dir() / "tf"
    if not path.is_dir():
        pytest.skip(f"TF fixtures not found at {path} (set LITEBERT_FIXTURES_DIR)")
    return path


@pytest.fixture
def one_thread():
    """One intra-op thread for the test: tiny matrices gain nothing from more, and on a shared 2-core machine
    spinning OpenMP threads slow everything down. Modules opt in with ``pytestmark``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _cached(method):
    """Cache a :class:`TinyData` method's result per arguments on the instance (it lives for the whole session)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        key = (method.__name__, args, tuple(sorted(kwargs.items())))
        if key not in self._cache:
            self._cache[key] = method(self, *args, **kwargs)
        return self._cache[key]

    return wrapper


class TinyData:
    """Small inputs built from the public data once per test session, in one temporary directory; every method is
    cached, so tests that ask for the same thing share it.

    Corpora: :meth:`wikitext_subset`, :meth:`clue_subset` (and the whole files :meth:`wikitext_train`,
    :meth:`clue_zh`, :meth:`news_zh`). Tokenizers: :meth:`tokenizer` (vocabulary 3000 by default). Prepared data:
    :meth:`prepared`, and :meth:`pretraining_data` (the one the pretraining tests train on). Models:
    :meth:`model_dir` (random ``albert-debug`` weights + a tokenizer trained on the given text).
    """

    def __init__(self, data: Path, root: Path) -> None:
        self.data, self.root = data, root
        self._cache: dict = {}

    def wikitext_train(self) -> Path:
        return self.data / "wikitext-2" / "wiki.train.tokens"

    def clue_zh(self) -> Path:
        return self.data / "zh_clue_corpus_small_sample" / "CLUECorpusSmall_bert_sampled.txt"

    def news_zh(self) -> Path:
        return self.data / "zh_news_albert_zh" / "news_zh_1.txt"

    @_cached
    def wikitext_subset(self, n_articles: int = 60) -> Path:
        """The first ``n_articles`` WikiText-2 train articles as a file (about 18 KB each)."""
        out = self.root / f"wikitext_{n_articles}.tokens"
        all_lines = self.wikitext_train().read_text(encoding="utf-8").split("\n")
        lines, seen = [], 0
        for i, s in enumerate(all_lines):
            # an article title: ' = Title = ' with blank lines around it (not ' = = Section = = ')
            if (
                s.startswith(" = ")
                and not s.startswith(" = = ")
                and s.endswith(" = ")
                and 0 < i < len(all_lines) - 1
                and not all_lines[i - 1].strip()
                and not all_lines[i + 1].strip()
            ):
                seen += 1
                if seen > n_articles:
                    break
            lines.append(s + "\n")
        out.write_text("".join(lines), encoding="utf-8")
        return out

    @_cached
    def clue_subset(self, n_docs: int = 300) -> Path:
        """The first ``n_docs`` documents of the CLUE sample (BERT format) as a file."""
        out = self.root / f"clue_{n_docs}.txt"
        docs = [d for d in self.clue_zh().read_text(encoding="utf-8").split("\n\n") if d.strip()][:n_docs]
        out.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
        return out

    @_cached
    def tokenizer(self, kind: str, vocab_size: int = 3000, keep_accents: bool = False, lowercase: bool = True) -> Path:
        """A tokenizer directory trained on the CLUE sample (``chinese``) or 60 WikiText-2 articles (the others)."""
        out = self.root / f"tok_{kind}_{vocab_size}_{keep_accents}_{lowercase}"
        corpus = [self.clue_zh()] if kind == "chinese" else [self.wikitext_subset(60)]
        train_tokenizer(corpus, kind, vocab_size, out, lowercase=lowercase, keep_accents=keep_accents)
        return out

    @_cached
    def prepared(self, name: str, corpus: tuple[str, ...], tokenizer: str, **kwargs) -> Path:
        """``prepare`` into a cached directory named ``name`` (kwargs go to PrepareConfig)."""
        out = self.root / "prepared" / name
        prepare(PrepareConfig(corpus=list(corpus), tokenizer=tokenizer, output=out, progress=False, **kwargs))
        return out

    @_cached
    def pretraining_data(self) -> Path:
        """A SentencePiece tokenizer (1000 ids) and shards (max_seq_length 64, seed 1) from the first 300 kB of
        WikiText-2's validation split: what the pretraining tests train on."""
        root = self.root / "pretrain_data"  # corpus.txt, tok/, data/ (tests read the corpus and tokenizer too)
        root.mkdir()
        corpus = root / "corpus.txt"
        with open(self.data / "wikitext-2" / "wiki.valid.tokens", encoding="utf-8") as f:
            corpus.write_text(f.read(300_000), encoding="utf-8")
        train_tokenizer([corpus], "sentencepiece", 1000, root / "tok")
        prepare(
            PrepareConfig(
                corpus=[str(corpus)],
                tokenizer=str(root / "tok"),
                output=root / "data",
                max_seq_length=64,
                seed=1,
                progress=False,
            )
        )
        return root / "data"

    def model_dir(self, path: Path, corpus_files: list[Path], kind: str, vocab_size: int = 1500) -> Path:
        """A model directory at ``path``: a ``kind`` tokenizer trained on ``corpus_files`` and an ``albert-debug``
        model with random weights (seed 0) of its vocabulary size."""
        tok = train_tokenizer([str(f) for f in corpus_files], kind, vocab_size, path)
        torch.manual_seed(0)
        AlbertForPreTraining(AlbertConfig.from_preset("albert-debug", vocab_size=tok.vocab_size)).save_pretrained(path)
        return path


@pytest.fixture(scope="session")
def tiny(shared_data, tmp_path_factory) -> TinyData:
    """The session's :class:`TinyData` (skips, through ``shared_data``, when the public data is absent)."""
    return TinyData(shared_data, tmp_path_factory.mktemp("tiny"))
