"""Shared, cached builders for the data and tokenizer tests (trained tokenizers, prepared directories).

Built once per test process in a temporary directory: a WikiText-2 subset (the first articles), small tokenizers
(vocabulary 2000–4000) and prepared data. Tests that use them take the ``shared_data`` fixture, which skips when
``../shared/data`` is absent.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from litebert.paths import data_dir

_ROOT = Path(tempfile.mkdtemp(prefix="litebert-data-tests-"))
atexit.register(shutil.rmtree, _ROOT, True)


def tmp_root() -> Path:
    return _ROOT


def wikitext_train() -> Path:
    return data_dir() / "wikitext-2" / "wiki.train.tokens"


def clue_zh() -> Path:
    return data_dir() / "zh_clue_corpus_small_sample" / "CLUECorpusSmall_bert_sampled.txt"


def news_zh() -> Path:
    return data_dir() / "zh_news_albert_zh" / "news_zh_1.txt"


@functools.lru_cache(maxsize=None)
def wikitext_subset(n_articles: int = 60) -> Path:
    """The first ``n_articles`` WikiText-2 train articles as a file (about 18 KB each)."""
    out = _ROOT / f"wikitext_{n_articles}.tokens"
    all_lines = wikitext_train().read_text(encoding="utf-8").split("\n")
    lines, seen = [], 0
    for i, s in enumerate(all_lines):
        # an article title: ' = Title = ' with blank lines around it (not ' = = Section = = ')
        if (s.startswith(" = ") and not s.startswith(" = = ") and s.endswith(" = ") and 0 < i < len(all_lines) - 1
                and not all_lines[i - 1].strip() and not all_lines[i + 1].strip()):
            seen += 1
            if seen > n_articles:
                break
        lines.append(s + "\n")
    out.write_text("".join(lines), encoding="utf-8")
    return out


@functools.lru_cache(maxsize=None)
def clue_subset(n_docs: int = 300) -> Path:
    """The first ``n_docs`` documents of the CLUE sample (BERT format) as a file."""
    out = _ROOT / f"clue_{n_docs}.txt"
    text = clue_zh().read_text(encoding="utf-8")
    docs = [d for d in text.split("\n\n") if d.strip()][:n_docs]
    out.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return out


@functools.lru_cache(maxsize=None)
def trained_tokenizer(kind: str, vocab_size: int = 3000, keep_accents: bool = False, lowercase: bool = True) -> Path:
    from litebert.tokenization import train_tokenizer

    out = _ROOT / f"tok_{kind}_{vocab_size}_{keep_accents}_{lowercase}"
    corpus = [clue_zh()] if kind == "chinese" else [wikitext_subset(60)]
    train_tokenizer(corpus, kind, vocab_size, out, lowercase=lowercase, keep_accents=keep_accents)
    return out


@functools.lru_cache(maxsize=None)
def prepared(name: str, corpus: tuple[str, ...], tokenizer: str, **kwargs) -> Path:
    """``prepare`` into a cached directory named ``name`` (kwargs go to PrepareConfig)."""
    from litebert.data import PrepareConfig, prepare

    out = _ROOT / "prepared" / name
    prepare(PrepareConfig(corpus=list(corpus), tokenizer=tokenizer, output=out, progress=False, **kwargs))
    return out
