"""Tokenizers for ALBERT: SentencePiece (ALBERT's own ``spiece.model``), WordPiece (BERT ``vocab.txt``) and
BERT-Chinese (every CJK character its own token, WordPiece for the rest; albert_zh's vocabulary).

Every kind encodes through one ``tokenizers.Tokenizer`` built by the same recipe that ``transformers`` uses when it
loads the saved directory (``AlbertTokenizer`` / ``BertTokenizer`` rebuild their pipeline from the vocabulary and
the flags in ``tokenizer_config.json``), so litebert and ``transformers.AutoTokenizer`` give the same ids by
construction; ``tests/test_tokenization.py`` checks it. Lowercasing and accent stripping are stored in
``tokenizer_config.json`` (``do_lower_case``, ``keep_accents`` / ``strip_accents``) and read back by both.

Special-token ids always come from the vocabulary (``tok.cls_token_id`` ...), never from constants. ALBERT's
SentencePiece layout is ``<pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4``; WordPiece vocabularies we train start
``[PAD] [UNK] [CLS] [SEP] [MASK]``; albert_zh's 21128-token ``vocab.txt`` has ``[PAD]=0 [UNK]=100 [CLS]=101``...

Sources: google-research/albert ``tokenization.py`` (lowercase + accent stripping before SentencePiece),
transformers ``models/albert/tokenization_albert.py`` and ``models/bert/tokenization_bert.py`` (the pipelines).
"""

from __future__ import annotations

import base64
import collections
import io
import itertools
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sentencepiece as spm
from tokenizers import AddedToken, decoders, normalizers, pre_tokenizers, processors, trainers
from tokenizers import Tokenizer as _BackendTokenizer
from tokenizers.models import Unigram, WordPiece

from litebert.corpus import CorpusStats, check_corpus, iter_sentences_text, name_list
from litebert.errors import LitebertError
from litebert.fileio import atomic_write_bytes, atomic_write_json, check_output_target, read_json, sha256_bytes
from litebert.protowire import proto_fields

KINDS = ("sentencepiece", "wordpiece", "chinese")
_SP_SPECIALS = {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
_WP_SPECIALS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
# Pieces that start a word in SentencePiece vocabularies besides "▁x" (google-research/albert
# create_pretraining_data.py `_is_start_piece`: a word that starts with punctuation is a word of its own).
_SP_START_PUNCT = set('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
# C0 controls, DEL and C1 controls: Python's str.split() and the Rust pipelines disagree on some of them (U+001C-1F
# and U+0085 NEL are whitespace to Python; BertNormalizer deletes them as control characters), so a text holding one
# is encoded whole by the pipeline in encode_batch_flat.
_CTRL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Most distinct words :meth:`AlbertTokenizer.encode_batch_flat` remembers (~250 bytes each: ~16 MB); the cache is
# emptied when full. Distinct words grow with the corpus, so an unbounded cache grew by ~200 MB per worker per million
# of them; by Zipf's law the most frequent 65k words are most of a corpus's tokens (a cache of 8k made prepare
# ~2x slower on WikiText-2, 64k costs nothing there).
WORD_CACHE_SIZE = 1 << 16


class _WordIds:
    """The word cache of :meth:`AlbertTokenizer.encode_batch_flat`: ``slot[word]`` indexes ``starts``/``lens``
    (int64) into ``ids`` (int32, every cached word's ids concatenated), so a batch's ids are one numpy gather."""

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}
        self.ids = np.zeros(0, np.int32)
        self.starts = np.zeros(0, np.int64)
        self.lens = np.zeros(0, np.int64)

    def add(self, words: list[str], id_lists: list[list[int]]) -> None:
        lens = np.fromiter(map(len, id_lists), np.int64, len(id_lists))
        ids = np.fromiter(itertools.chain.from_iterable(id_lists), np.int32, int(lens.sum()))
        self.slot.update(zip(words, range(len(self.lens), len(self.lens) + len(words))))
        self.starts = np.concatenate([self.starts, len(self.ids) + np.cumsum(lens) - lens])
        self.lens = np.concatenate([self.lens, lens])
        self.ids = np.concatenate([self.ids, ids])


_UNUSED_RE = re.compile(r"^\[unused\d+\]$|^\[unused_\d+\]$")


def is_cjk_char(ch: str) -> bool:
    """True for a CJK ideograph (the ranges BERT's ``_is_chinese_char`` uses)."""
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


# --------------------------------------------------------------------------------------------------------------
# Pipelines (identical to what transformers rebuilds from the saved files)
# --------------------------------------------------------------------------------------------------------------
def _albert_backend(
    vocab_scores: list[tuple[str, float]], unk_id: int, charsmap: bytes | None, lowercase: bool, keep_accents: bool
) -> _BackendTokenizer:
    """transformers ``AlbertTokenizer.__init__``'s pipeline: quotes, NFKD + strip accents, lowercase, spm charsmap,
    whitespace split + Metaspace."""
    backend = _BackendTokenizer(Unigram(vocab_scores, unk_id=unk_id, byte_fallback=False))
    norm = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if not keep_accents:
        norm += [normalizers.NFKD(), normalizers.StripAccents()]
    if lowercase:
        norm.append(normalizers.Lowercase())
    if charsmap:
        norm.append(normalizers.Precompiled(charsmap))
    backend.normalizer = normalizers.Sequence(norm)
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")]
    )
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return backend


def _bert_backend(vocab: dict[str, int], unk_token: str, lowercase: bool, keep_accents: bool) -> _BackendTokenizer:
    """transformers ``BertTokenizer.__init__``'s pipeline (BertNormalizer with CJK spacing, BertPreTokenizer)."""
    backend = _BackendTokenizer(
        WordPiece(vocab, unk_token=unk_token, continuing_subword_prefix="##", max_input_chars_per_word=100)
    )
    backend.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=not keep_accents, lowercase=lowercase
    )
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    return backend


def _finish_backend(backend: _BackendTokenizer, specials: dict[str, str], sentencepiece: bool) -> None:
    """Register the special tokens (so ``[MASK]`` in raw text is one token) and the ``[CLS] A [SEP] B [SEP]``
    template."""
    added = []
    for role in ("pad", "unk", "cls", "sep", "mask"):
        lstrip = sentencepiece and role == "mask"  # as transformers' AlbertTokenizerFast
        added.append(AddedToken(specials[role], special=True, normalized=False, lstrip=lstrip, rstrip=False))
    backend.add_special_tokens(added)
    cls, sep = specials["cls"], specials["sep"]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, backend.token_to_id(cls)), (sep, backend.token_to_id(sep))],
    )


def _spm_charsmap(model_bytes: bytes) -> bytes | None:
    """Read ``normalizer_spec.precompiled_charsmap`` from a serialized SentencePiece ``ModelProto`` (field 3, sub
    field 2; sentencepiece ``src/sentencepiece_model.proto``) with litebert's minimal protobuf wire-format reader,
    so that no protobuf package is needed. Wire type 2 fields are ``bytes``."""
    for num, wt, val in proto_fields(model_bytes):
        if num == 3 and wt == 2 and isinstance(val, bytes):
            for sub, swt, sval in proto_fields(val):
                if sub == 2 and swt == 2 and isinstance(sval, bytes):
                    return sval or None
    return None


# --------------------------------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Tokenizer:
    """A loaded tokenizer: one ``tokenizers`` pipeline plus the vocabulary files it was made from.

    Attributes:
        kind: ``"sentencepiece"``, ``"wordpiece"`` or ``"chinese"``.
        backend: the ``tokenizers.Tokenizer`` that encodes (the same pipeline transformers builds).
        do_lower_case, keep_accents: normalisation flags, stored in ``tokenizer_config.json``.
        special_tokens: role (``pad unk cls sep mask``) → token string.
        spm_model: the serialized ``spiece.model`` (sentencepiece kind), else None.
    """

    kind: str
    backend: _BackendTokenizer
    do_lower_case: bool
    keep_accents: bool
    special_tokens: dict[str, str]
    spm_model: bytes | None = None
    model_max_length: int = 512
    _id_cache: dict = field(default_factory=dict, repr=False)

    # ---- ids of special tokens (always from the vocabulary) ----
    def _special_id(self, role: str) -> int:
        tid = self.backend.token_to_id(self.special_tokens[role])
        if tid is None:
            raise LitebertError(f"tokenizer vocabulary has no {role} token {self.special_tokens[role]!r}")
        return tid

    @property
    def pad_token_id(self) -> int:
        return self._special_id("pad")

    @property
    def unk_token_id(self) -> int:
        return self._special_id("unk")

    @property
    def cls_token_id(self) -> int:
        return self._special_id("cls")

    @property
    def sep_token_id(self) -> int:
        return self._special_id("sep")

    @property
    def mask_token_id(self) -> int:
        return self._special_id("mask")

    @property
    def mask_token(self) -> str:
        return self.special_tokens["mask"]

    @property
    def vocab_size(self) -> int:
        """Number of ids (the model's ``vocab_size``)."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def all_special_ids(self) -> list[int]:
        return sorted({self._special_id(r) for r in self.special_tokens})

    # ---- encoding ----
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Ids of ``text``; without ``[CLS]``/``[SEP]`` unless ``add_special_tokens`` (then ``[CLS] text [SEP]``)."""
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[list[int]]:
        """Ids of many texts at once; exactly the ids of :meth:`encode` (see :meth:`encode_batch_flat`)."""
        texts = list(texts)
        if add_special_tokens:
            return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=True)]
        flat, lengths = self.encode_batch_flat(texts)
        ids, ends = flat.tolist(), np.cumsum(lengths).tolist()  # one conversion, then list slices (fresh lists)
        return [ids[a:b] for a, b in zip([0, *ends[:-1]], ends)]

    def encode_batch_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of many texts (no special tokens added) as one ``int32 [T]`` array plus ``int64 [len(texts)]``
        lengths; exactly the ids of :meth:`encode` (``tests/test_tokenization.py`` checks it on the corpora).

        Why it is exact: both pipelines cut text at whitespace before the model (Metaspace / BertPreTokenizer)
        and every normalizer step acts within a whitespace-separated word, so a text's ids are the concatenation
        of its words' ids. Each distinct word is encoded once by the ``tokenizers`` pipeline and cached (words
        repeat: Zipf); printable-ASCII text is lowercased first (for ASCII, lowercasing and ALBERT's quote
        replacement are the only steps that change anything), so "The" and "the" share an entry. Special tokens
        in the raw text are cut out first, as the pipeline does. Text with control characters (which Python and
        Rust disagree on as whitespace) is encoded whole by the pipeline. The gather is vectorized with numpy.
        """
        words = self._id_cache.get("words")
        if words is None or len(words.slot) > WORD_CACHE_SIZE:  # bounded: distinct words grow with the corpus
            alts = sorted(set(self.special_tokens.values()), key=len, reverse=True)
            self._id_cache["special_re"] = re.compile("(" + "|".join(re.escape(a) for a in alts) + ")")
            words = self._id_cache["words"] = _WordIds()
            words.add(["\x00" + t for t in alts], [[self.backend.token_to_id(t)] for t in alts])
        special_re = self._id_cache["special_re"]
        sp, lower = self.kind == "sentencepiece", self.do_lower_case
        keys: list[str] = []
        counts: list[int] = []
        whole = "".join(texts)  # what holds for the whole batch holds for each text: checked once
        any_ctrl, all_ascii = _CTRL_RE.search(whole) is not None, whole.isascii()
        for t in texts:  # per text, not per word: the word loops below run in C
            n0 = len(keys)
            if any_ctrl and _CTRL_RE.search(t):
                keys.append("\x01" + t)  # encoded whole
            else:
                ascii_ = all_ascii or t.isascii()
                parts = special_re.split(t) if ("[" in t or "<" in t) else [t]
                for k, part in enumerate(parts):
                    if k % 2:
                        keys.append("\x00" + part)
                        continue
                    if ascii_:
                        if sp and ("``" in part or "''" in part):
                            part = part.replace("``", '"').replace("''", '"')
                        if lower:
                            part = part.lower()
                    keys.extend(part.split())
            counts.append(len(keys) - n0)
        missing = list(set(keys).difference(words.slot))
        if missing:
            words.add(missing, self._backend_batch([k[1:] if k[0] == "\x01" else k for k in missing]))
        widx = np.fromiter(map(words.slot.__getitem__, keys), np.int64, len(keys))
        occ_len = words.lens[widx]
        total = int(occ_len.sum())
        occ_first = np.cumsum(occ_len) - occ_len
        flat = words.ids[np.repeat(words.starts[widx] - occ_first, occ_len) + np.arange(total)]
        counts = np.array(counts, dtype=np.int64).reshape(len(texts))
        text_end = np.cumsum(counts)
        word_cum = np.concatenate([[0], np.cumsum(occ_len)])
        lengths = word_cum[text_end] - word_cum[text_end - counts]
        return flat, lengths

    def _backend_batch(self, texts: list[str]) -> list[list[int]]:
        if hasattr(self.backend, "encode_batch_fast"):
            encs = self.backend.encode_batch_fast(texts, add_special_tokens=False)
        else:  # pragma: no cover - tokenizers < 0.21
            encs = self.backend.encode_batch(texts, add_special_tokens=False)
        return [e.ids for e in encs]

    def encode_pair(
        self, text: str, text_pair: str | None = None, max_length: int | None = None
    ) -> dict[str, list[int]]:
        """``[CLS] A [SEP] (B [SEP])`` with ``token_type_ids`` and ``attention_mask``, as transformers'
        ``tokenizer(text, text_pair, truncation="longest_first", max_length=...)``; for fine-tuning."""
        a = self.encode(text)
        b = self.encode(text_pair) if text_pair is not None else None
        if max_length is not None:
            budget = max_length - (3 if b is not None else 2)
            if budget < 0:
                raise LitebertError(f"max_length {max_length} is too small for the special tokens")
            while (
                len(a) + (len(b) if b is not None else 0) > budget
            ):  # longest first, from the end; the second text on a tie (as transformers)
                if b is not None and len(b) >= len(a):
                    b.pop()
                else:
                    a.pop()
        ids = [self.cls_token_id, *a, self.sep_token_id]
        types = [0] * len(ids)
        if b is not None:
            ids += [*b, self.sep_token_id]
            types += [1] * (len(b) + 1)
        return {"input_ids": ids, "token_type_ids": types, "attention_mask": [1] * len(ids)}

    def encode_with_offsets(self, texts: Sequence[str]) -> list[tuple[list[int], np.ndarray]]:
        """Ids (no special tokens) and character offsets of many texts: per text ``(ids, offsets)`` with
        ``offsets`` ``int64 [T, 2]``, token ``i`` coming from ``text[offsets[i, 0]:offsets[i, 1]]`` (Python string
        indices, i.e. code points, for every kind). The ``tokenizers`` pipeline tracks them through its
        normalizer (lowercase, NFKD + accent stripping, SentencePiece's charsmap), so ``"Héllo"`` → ``▁he``
        ``(0, 2)``; SentencePiece's ``▁`` covers no character (the piece's span starts at its first letter).
        The ids are those of :meth:`encode`. Used by extractive QA to map answer characters to tokens.
        """
        encs = self.backend.encode_batch(list(texts), add_special_tokens=False)
        return [(e.ids, np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2)) for e in encs]

    def tokenize(self, text: str) -> list[str]:
        """Token strings of ``text`` (no special tokens added)."""
        return self.backend.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> int | list[int]:
        unk = self.unk_token_id
        if isinstance(tokens, str):
            tid = self.backend.token_to_id(tokens)
            return unk if tid is None else tid
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Iterable[int]) -> str | list[str]:
        if isinstance(ids, (int, np.integer)):
            return self.backend.id_to_token(int(ids))
        return [self.backend.id_to_token(int(i)) for i in ids]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def get_vocab(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)

    # ---- tables used by the data pipeline ----
    def word_start_table(self) -> np.ndarray:
        """``bool [V]``: True where a token starts a word (docs/algorithms.md §2/§3 "Words").

        WordPiece/Chinese: every token except ``##`` continuations. SentencePiece: pieces that begin with ``▁``, or
        are ``<...>`` / single punctuation (google-research/albert ``_is_start_piece``).
        """
        if "word_start" not in self._id_cache:
            vocab = self.get_vocab()
            table = np.zeros(max(vocab.values()) + 1, dtype=bool)
            for tok, i in vocab.items():
                if self.kind == "sentencepiece":
                    table[i] = tok.startswith("▁") or tok.startswith("<") or tok in _SP_START_PUNCT
                else:
                    table[i] = not tok.startswith("##")
            self._id_cache["word_start"] = table
        return self._id_cache["word_start"]

    def random_replacement_ids(self) -> np.ndarray:
        """``int64 [K]``: ids a masked token may be replaced with (docs/algorithms.md §3 "10% a random vocabulary token"):
        every id except special tokens, ``<unk>``-like control tokens and BERT's ``[unusedN]`` slots."""
        if "random_ids" not in self._id_cache:
            vocab = self.get_vocab()
            special = set(self.all_special_ids)
            keep = [
                i
                for t, i in vocab.items()
                if i not in special
                and not _UNUSED_RE.match(t)
                and not (t.startswith("<") and t.endswith(">"))
                and not (t.startswith("[") and t.endswith("]") and t.upper() == t and len(t) > 2)
            ]
            self._id_cache["random_ids"] = np.array(sorted(keep), dtype=np.int64)
        return self._id_cache["random_ids"]

    def info(self) -> dict:
        """JSON-able description for the data manifest: kind, vocab_size, flags, special tokens and ids."""
        return {
            "kind": self.kind,
            "vocab_size": self.vocab_size,
            "do_lower_case": self.do_lower_case,
            "keep_accents": self.keep_accents,
            "special_tokens": dict(self.special_tokens),
            "pad_token_id": self.pad_token_id,
            "unk_token_id": self.unk_token_id,
            "cls_token_id": self.cls_token_id,
            "sep_token_id": self.sep_token_id,
            "mask_token_id": self.mask_token_id,
            "vocab_sha256": self.vocab_fingerprint(),
        }

    def vocab_fingerprint(self) -> str:
        """SHA-256 (hex) of the ordered vocabulary: the token of each id 0..V−1, each followed by a newline, UTF-8.
        Equal fingerprints mean every id stands for the same token; the data manifest stores it so that data and
        models of another tokenizer with the same vocabulary size are refused."""
        tokens = self.convert_ids_to_tokens(range(self.vocab_size))
        return sha256_bytes("".join(f"{t}\n" for t in tokens).encode("utf-8"))

    # ---- saving ----
    def save(self, directory: str | os.PathLike) -> list[Path]:
        """Write the Hugging Face tokenizer files into ``directory`` (created if needed): ``spiece.model`` or
        ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``. Each file is
        written to a temporary name and renamed. Returns the paths written."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        if self.kind == "sentencepiece":
            if self.spm_model is not None:
                written.append(atomic_write_bytes(out / "spiece.model", self.spm_model))
            cls_name = "AlbertTokenizer"
        else:
            vocab = self.get_vocab()
            ordered = sorted(vocab.items(), key=lambda kv: kv[1])
            written.append(atomic_write_bytes(out / "vocab.txt", "".join(t + "\n" for t, _ in ordered).encode("utf-8")))
            cls_name = "BertTokenizer"
        written.append(atomic_write_bytes(out / "tokenizer.json", self.backend.to_str(pretty=False).encode("utf-8")))
        sp = self.special_tokens
        added_decoder = {}
        for role in ("pad", "unk", "cls", "sep", "mask"):
            added_decoder[str(self._special_id(role))] = {
                "content": sp[role],
                "lstrip": self.kind == "sentencepiece" and role == "mask",
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
        config = {
            "tokenizer_class": cls_name,
            "do_lower_case": self.do_lower_case,
            "model_max_length": self.model_max_length,
            "pad_token": sp["pad"],
            "unk_token": sp["unk"],
            "cls_token": sp["cls"],
            "sep_token": sp["sep"],
            "mask_token": sp["mask"],
            "added_tokens_decoder": added_decoder,
            "clean_up_tokenization_spaces": False,
            # without it transformers 5's AlbertTokenizer returns no token_type_ids and a pair becomes one segment
            "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
            "litebert_kind": self.kind,
        }
        if self.kind == "sentencepiece":
            config.update(
                {
                    "keep_accents": self.keep_accents,
                    "remove_space": True,
                    "bos_token": sp["cls"],
                    "eos_token": sp["sep"],
                }
            )
        else:
            config.update(
                {
                    "strip_accents": not self.keep_accents,
                    "tokenize_chinese_chars": True,
                    "keep_accents": self.keep_accents,
                }
            )
        written.append(atomic_write_json(out / "tokenizer_config.json", config))
        stm = {
            "pad_token": sp["pad"],
            "unk_token": sp["unk"],
            "cls_token": sp["cls"],
            "sep_token": sp["sep"],
            "mask_token": sp["mask"],
        }
        if self.kind == "sentencepiece":
            stm.update({"bos_token": sp["cls"], "eos_token": sp["sep"]})
        written.append(atomic_write_json(out / "special_tokens_map.json", stm))
        return written


# --------------------------------------------------------------------------------------------------------------
# Building and loading
# --------------------------------------------------------------------------------------------------------------
def _tokenizer_from_spm(
    model_bytes: bytes, lowercase: bool, keep_accents: bool, specials: dict[str, str], source: str
) -> Tokenizer:
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(model_bytes)
    except Exception as exc:  # sentencepiece raises plain RuntimeError/OSError
        raise LitebertError(f"{source}: not a valid SentencePiece model ({exc})") from None
    vocab = [(sp.id_to_piece(i), float(sp.get_score(i))) for i in range(sp.get_piece_size())]
    backend = _albert_backend(vocab, sp.unk_id(), _spm_charsmap(model_bytes), lowercase, keep_accents)
    _check_specials(backend, specials, source)
    _finish_backend(backend, specials, sentencepiece=True)
    return Tokenizer("sentencepiece", backend, lowercase, keep_accents, specials, spm_model=model_bytes)


def _tokenizer_from_wordpiece(
    vocab: dict[str, int], kind: str, lowercase: bool, keep_accents: bool, specials: dict[str, str], source: str
) -> Tokenizer:
    _check_wordpiece_vocab(vocab, specials, source)
    _check_specials_vocab(vocab, specials, source)
    backend = _bert_backend(vocab, specials["unk"], lowercase, keep_accents)
    _finish_backend(backend, specials, sentencepiece=False)
    return Tokenizer(kind, backend, lowercase, keep_accents, specials)


def _check_specials(backend: _BackendTokenizer, specials: dict[str, str], source: str) -> None:
    missing = [t for t in specials.values() if backend.token_to_id(t) is None]
    if missing:
        raise LitebertError(f"{source}: vocabulary lacks the special tokens {missing}")


def _check_wordpiece_vocab(vocab: dict[str, int], specials: dict[str, str], source: str) -> None:
    """Refuse a SentencePiece vocabulary (word-start pieces ``▁x``, specials ``<pad>``/``<unk>``) offered as a
    WordPiece ``vocab.txt``: WordPiece would find almost no word in it and encode most text as the unknown token."""
    starts = sum(1 for t in vocab if t.startswith("▁"))
    continuations = sum(1 for t in vocab if t.startswith("##"))
    sp_specials = [t for t in (specials["pad"], specials["unk"]) if t in ("<pad>", "<unk>")]
    if starts > continuations or (sp_specials and starts):
        hint = f" and the special tokens {', '.join(sp_specials)}" if sp_specials else ""
        raise LitebertError(
            f"{source}: a SentencePiece vocabulary ({starts} pieces start with '▁', {continuations} with '##'"
            f"{hint}), not a WordPiece one; as vocab.txt it would turn most words into the unknown token. Load it "
            "with its SentencePiece model instead: put spiece.model (the .model file trained with it) in the "
            "directory, or a tokenizer.json whose model is Unigram"
        )


def _check_specials_vocab(vocab: dict[str, int], specials: dict[str, str], source: str) -> None:
    missing = [t for t in specials.values() if t not in vocab]
    if missing:
        raise LitebertError(f"{source}: vocabulary lacks the special tokens {missing}")


def _read_vocab_txt(path: Path) -> dict[str, int]:
    vocab: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            tok = line.rstrip("\n").rstrip("\r")
            if tok not in vocab:
                vocab[tok] = i
    if not vocab:
        raise LitebertError(f"{path}: empty vocabulary file")
    return vocab


def looks_chinese(vocab: Iterable[str]) -> bool:
    """Whether a vocabulary is a Chinese one: 500 or more single CJK characters (``▁`` prefixes ignored)."""
    n = sum(1 for t in vocab if len(t.removeprefix("▁")) == 1 and is_cjk_char(t.removeprefix("▁")))
    return n >= 500


def load_tokenizer(directory: str | os.PathLike) -> Tokenizer:
    """Load a tokenizer directory: ours, albert-base-v2's (``spiece.model``), albert_zh's (``vocab.txt``), or a
    ``tokenizer.json`` with a Unigram or WordPiece model.

    ``tokenizer_config.json`` (when present) gives ``do_lower_case`` (default True), ``keep_accents`` /
    ``strip_accents`` and the special-token strings. Files are preferred in the order ``spiece.model``,
    ``vocab.txt``, ``tokenizer.json``; the pipeline is rebuilt from the vocabulary as transformers does.

    Raises:
        LitebertError: the directory does not exist or holds none of those files, or a file is unreadable.
    """
    d = Path(directory)
    if not d.is_dir():
        raise LitebertError(f"tokenizer directory not found: {d}")
    cfg: dict = {}
    cfg_path = d / "tokenizer_config.json"
    if cfg_path.is_file():
        cfg = read_json(cfg_path, what="tokenizer config", expect=dict)
    lowercase = bool(cfg.get("do_lower_case", True))
    if "keep_accents" in cfg:
        keep_accents = bool(cfg["keep_accents"])
    elif cfg.get("strip_accents") is not None:
        keep_accents = not bool(cfg["strip_accents"])
    else:
        keep_accents = not lowercase if (d / "vocab.txt").is_file() and not (d / "spiece.model").is_file() else False

    def specials_from(defaults: dict[str, str]) -> dict[str, str]:
        out = {}
        for role, default in defaults.items():
            v = cfg.get(f"{role}_token", default)
            out[role] = v["content"] if isinstance(v, dict) else str(v)
        return out

    spm_path, vocab_path, json_path = d / "spiece.model", d / "vocab.txt", d / "tokenizer.json"
    cls_name = cfg.get("tokenizer_class", "")
    if spm_path.is_file() and "Bert" not in cls_name:
        tok = _tokenizer_from_spm(
            spm_path.read_bytes(), lowercase, keep_accents, specials_from(_SP_SPECIALS), str(spm_path)
        )
    elif vocab_path.is_file():
        vocab = _read_vocab_txt(vocab_path)
        kind = cfg.get("litebert_kind") or ("chinese" if looks_chinese(vocab) else "wordpiece")
        tok = _tokenizer_from_wordpiece(
            vocab, kind, lowercase, keep_accents, specials_from(_WP_SPECIALS), str(vocab_path)
        )
    elif json_path.is_file():
        data = read_json(json_path, what="tokenizer.json", expect=dict)
        if not isinstance(data.get("model"), dict):
            raise LitebertError(f'{json_path}: not a tokenizer.json (no "model" object)')
        model = data["model"]
        if model.get("type") == "Unigram":
            charsmap = None
            norm = data.get("normalizer") or {}
            for n in norm.get("normalizers", [norm]):
                if n.get("type") == "Precompiled" and n.get("precompiled_charsmap"):
                    charsmap = base64.b64decode(n["precompiled_charsmap"])
            specials = specials_from(_SP_SPECIALS)
            vocab_scores = [(p, float(s)) for p, s in model["vocab"]]
            unk_id = model.get("unk_id")  # 0 is a valid id (SentencePiece's default puts <unk> there)
            if unk_id is None:  # no unknown piece declared: the unk special token's id
                unk_id = next((i for i, (p, _) in enumerate(vocab_scores) if p == specials["unk"]), None)
                if unk_id is None:
                    raise LitebertError(
                        f"{json_path}: the Unigram model has no unk_id and its vocabulary no {specials['unk']!r} token"
                    )
            backend = _albert_backend(vocab_scores, int(unk_id), charsmap, lowercase, keep_accents)
            _check_specials(backend, specials, str(json_path))
            _finish_backend(backend, specials, sentencepiece=True)
            tok = Tokenizer("sentencepiece", backend, lowercase, keep_accents, specials)
        elif model.get("type") == "WordPiece":
            vocab = dict(model["vocab"])
            kind = cfg.get("litebert_kind") or ("chinese" if looks_chinese(vocab) else "wordpiece")
            tok = _tokenizer_from_wordpiece(
                vocab, kind, lowercase, keep_accents, specials_from(_WP_SPECIALS), str(json_path)
            )
        else:
            raise LitebertError(
                f"{json_path}: model type {model.get('type')!r} is not supported (expected Unigram or WordPiece)"
            )
    else:
        raise LitebertError(f"tokenizer directory {d} has none of spiece.model, vocab.txt, tokenizer.json")
    if isinstance(cfg.get("model_max_length"), int) and cfg["model_max_length"] < 10**9:
        tok.model_max_length = cfg["model_max_length"]
    return tok


def normalize_for_training(text: str, lowercase: bool, keep_accents: bool) -> str:
    """The lowercase / accent stripping that the SentencePiece pipeline applies before the model, applied to the
    training text so the learned pieces match what encoding will see (google-research/albert ``preprocess_text``)."""
    if not keep_accents:
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    if lowercase:
        text = text.lower()
    return text


def wordpiece_alphabet(
    sentences: Iterable[str], backend: _BackendTokenizer, coverage: float | None, max_size: int | None
) -> tuple[list[str], list[str]]:
    """The characters WordPiece training keeps (its alphabet) and the ``##`` pieces of those that occur inside a
    word, both sorted, from one pass over ``sentences`` through ``backend``'s normaliser and pre-tokenizer (the
    words the trainer counts).

    The alphabet is the fewest most frequent characters (ties: the lower code point first) that make up
    ``coverage`` of all character occurrences (SentencePiece's ``character_coverage``; None: every character), at
    most ``max_size`` (the ids left after the special tokens; None: no limit). transformers' BERT WordPiece recipe keeps a fixed
    1,000, enough for alphabetic text, but on Chinese text it drops most characters (4,337 CJK characters in
    CLUECorpusSmall's sample: 3,402 of them would become ``[UNK]``, including characters seen over 100 times).

    Both lists are given to the trainer, so that its result depends on the corpus alone: the ``tokenizers``
    trainer (0.23) numbers the ``##`` pieces in the iteration order of a hash map, different in every process, and
    those numbers break ties between merges of equal count; its ``limit_alphabet`` cut also breaks ties between
    characters of equal count in hash order. Given as special tokens, the ``##`` pieces
    take fixed ids, and ``initial_alphabet`` with ``limit_alphabet`` its size keeps exactly this alphabet.
    """
    words: collections.Counter[str] = collections.Counter()
    for s in sentences:
        words.update(w for w, _ in backend.pre_tokenizer.pre_tokenize_str(backend.normalizer.normalize_str(s)))
    counts: collections.Counter[str] = collections.Counter()
    inside: set[str] = set()
    for w, n in words.items():
        for c in w:
            counts[c] += n
        inside.update(w[1:])
    ranked = sorted(counts, key=lambda c: (-counts[c], c))
    if coverage is not None:
        total, kept, need = sum(counts.values()), 0, 0
        for c in ranked:
            if kept >= coverage * total:
                break
            kept += counts[c]
            need += 1
        ranked = ranked[: max(1, need)]
    alphabet = sorted(ranked if max_size is None else ranked[: max(1, max_size)])
    return alphabet, [f"##{c}" for c in alphabet if c in inside]


def train_tokenizer(
    corpus: Sequence[str | os.PathLike],
    kind: str,
    vocab_size: int,
    output: str | os.PathLike,
    lowercase: bool = True,
    keep_accents: bool = False,
    format: str = "auto",
    character_coverage: float | None = None,
    seed: int = 0,
    stats=None,
    text_column: str = "text",
) -> Tokenizer:
    """Train a tokenizer on ``corpus`` files (any format :func:`litebert.corpus.read_documents` reads) and
    save it to ``output`` (the Hugging Face files, see :meth:`Tokenizer.save`).

    Args:
        kind: ``sentencepiece`` (ALBERT unigram ``spiece.model``, ids ``<pad> <unk> [CLS] [SEP] [MASK]`` = 0..4),
            ``wordpiece`` (BERT ``vocab.txt``) or ``chinese`` (BERT-Chinese: every CJK character seen is a token).
        vocab_size: target size; SentencePiece may stop below it on a small corpus (soft limit).
        lowercase, keep_accents: normalisation, stored with the tokenizer.
        stats: a :class:`litebert.corpus.CorpusStats` to fill while reading (lines skipped as invalid
            UTF-8 or bad JSON, empty files of a directory, documents, sentences), for the caller's summary.
        text_column: the text field of JSON lines, Parquet/Arrow files and ``hf://`` datasets.

    Raises:
        LitebertError: unknown kind, vocab_size < 10, corpus problems (missing/empty files), or an ``output`` that is
            a file, not empty, or is, contains or is inside a corpus path (nothing is written then).
    """
    if kind not in KINDS:
        raise LitebertError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if vocab_size < 10:
        raise LitebertError(f"--vocab-size must be at least 10, got {vocab_size}")
    out = Path(output)
    # a tokenizer directory must hold one tokenizer: files of an earlier one (spiece.model beside vocab.txt) or of
    # anything else (a run) would mix with it, and loaders would pick the wrong files
    check_output_target(out, sources={"--corpus": [str(c) for c in corpus]})
    check_corpus(
        corpus, format, text_column
    )  # missing/empty/corrupt files and unreachable hf:// fail here, before any training
    stats = stats if stats is not None else CorpusStats()
    sentences = iter_sentences_text(
        corpus, format=format, stats=stats, text_column=text_column
    )  # (the output is written only at the end)
    first = next(sentences, None)
    if first is None:
        skipped = (
            f"; {stats.skipped_lines} line(s) were skipped as invalid (first: {stats.first_skipped})"
            if stats.skipped_lines
            else ""
        )
        if stats.empty_files and len(stats.empty_files) == len(stats.sources):
            skipped += f": every file is empty ({name_list(stats.empty_files)})"
        raise LitebertError(f"the corpus has no text to train on{skipped}")
    sentences = itertools.chain([first], sentences)
    if kind == "sentencepiece":

        def feed() -> Iterator[str]:
            for s in sentences:
                s = normalize_for_training(s, lowercase, keep_accents)
                # SentencePiece skips sentences above max_sentence_length bytes; cut long lines at spaces.
                while len(s) > 2000:
                    cut = s.rfind(" ", 0, 2000)
                    cut = cut if cut > 0 else 2000
                    yield s[:cut]
                    s = s[cut:].lstrip()
                if s.strip():
                    yield s

        buf = io.BytesIO()
        spm.set_random_generator_seed(seed)  # sentence shuffling/sampling: same corpus + seed -> same model
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=feed(),
                model_writer=buf,
                model_type="unigram",
                vocab_size=vocab_size,
                pad_id=0,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                control_symbols=["[CLS]", "[SEP]", "[MASK]"],
                pad_piece="<pad>",
                unk_piece="<unk>",
                character_coverage=character_coverage if character_coverage is not None else 0.99995,
                input_sentence_size=2_000_000,
                shuffle_input_sentence=True,
                hard_vocab_limit=False,
                num_threads=max(1, min(4, os.cpu_count() or 1)),
                seed_sentencepiece_size=200_000,
                minloglevel=2,
            )
        except RuntimeError as exc:  # sentencepiece reports every refusal as RuntimeError("INTERNAL: ...")
            raise LitebertError(f"SentencePiece training failed: {' '.join(str(exc).split())}") from None
        model_bytes = buf.getvalue()
        if not model_bytes:
            raise LitebertError("SentencePiece training produced no model (corpus too small?)")
        tok = _tokenizer_from_spm(model_bytes, lowercase, keep_accents, dict(_SP_SPECIALS), "trained model")
    else:
        specials = dict(_WP_SPECIALS)
        backend = _bert_backend({specials["unk"]: 0}, specials["unk"], lowercase, keep_accents)
        # a first pass over the corpus: the alphabet and its ## pieces, fixed before training (see wordpiece_alphabet)
        coverage = (character_coverage if character_coverage is not None else 0.99995) if kind == "wordpiece" else None
        alphabet, inner = wordpiece_alphabet(
            iter_sentences_text(corpus, format=format, text_column=text_column),
            backend,
            coverage,
            vocab_size - len(specials) if kind == "wordpiece" else None,
        )
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            special_tokens=[specials[r] for r in ("pad", "unk", "cls", "sep", "mask")] + inner,
            initial_alphabet=alphabet,
            limit_alphabet=len(alphabet),
            continuing_subword_prefix="##",
            show_progress=False,
        )
        backend.train_from_iterator(sentences, trainer=trainer)
        vocab = backend.get_vocab(with_added_tokens=True)
        tok = _tokenizer_from_wordpiece(vocab, kind, lowercase, keep_accents, specials, "trained vocabulary")
    tok.save(out)
    return tok
