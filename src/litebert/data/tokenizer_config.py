"""Settings of ``litebert train-tokenizer``: :class:`TrainTokenizerConfig` (the command's options derive from it).

It lives with the pretraining data settings (it names corpus files and their format); training itself is
:func:`litebert.tokenization.train_tokenizer`, which :meth:`TrainTokenizerConfig.train` calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from litebert.corpus import CORPUS_HELP, FORMATS, TEXT_COLUMN_HELP
from litebert.settings import check, setting
from litebert.tokenization import KINDS, train_tokenizer


@dataclass
class TrainTokenizerConfig:
    """Settings of one tokenizer training run. Raises LitebertError ``"--option value: why"`` when invalid."""

    corpus: list[str] = setting(metavar="FILE", help=CORPUS_HELP)
    output: str = setting(metavar="DIR", help="directory for the Hugging Face tokenizer files")
    kind: str = setting(
        "sentencepiece",
        choices=KINDS,
        help="sentencepiece (ALBERT unigram), wordpiece (BERT) or chinese (BERT-Chinese)",
    )
    vocab_size: int = setting(30000, ge=10, help="target vocabulary size (SentencePiece may stop below it)")
    lowercase: bool = setting(True, help="lowercase text (default: yes)")
    keep_accents: bool = setting(False, help="keep accents (default: strip them)")
    format: str = setting("auto", choices=FORMATS, help="corpus format (auto: detected per file)")
    text_column: str = setting("text", metavar="NAME", help=TEXT_COLUMN_HELP)
    seed: int = setting(0, help="seed of the trainer")

    def __post_init__(self) -> None:
        check(self)

    def train(self, stats=None):
        """Train and save the tokenizer (:func:`litebert.tokenization.train_tokenizer`); returns it."""
        return train_tokenizer(
            self.corpus,
            self.kind,
            self.vocab_size,
            self.output,
            lowercase=self.lowercase,
            keep_accents=self.keep_accents,
            format=self.format,
            seed=self.seed,
            stats=stats,
            text_column=self.text_column,
        )


__all__ = ["TrainTokenizerConfig"]
