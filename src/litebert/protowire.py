"""A minimal protobuf wire-format decoder (https://protobuf.dev/programming-guides/encoding/).

Enough to read the few fields litebert needs from two serialized messages without the ``protobuf`` package: the
TensorFlow bundle protos (:mod:`litebert.tf.bundle`) and a SentencePiece ``ModelProto``'s precompiled normalizer
(:mod:`litebert.tokenization`). It sits below both so that the tokenizer does not depend on the TensorFlow reader.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a base-128 varint at ``buf[pos]``; return (value, next position). Raises ValueError when cut off."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("varint runs past the end of its buffer")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def proto_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield (field number, wire type, value) of a serialized protobuf message.

    Varints (wire type 0) and fixed32/fixed64 (5/1) come back as unsigned ints, length-delimited fields (2) as
    bytes. Groups (3/4) are not used by the bundle protos and raise ValueError.
    """
    pos = 0
    while pos < len(buf):
        tag, pos = decode_varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = decode_varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise ValueError("fixed64 field runs past the end of the message")
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == 2:
            length, pos = decode_varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("length-delimited field runs past the end of the message")
            value = bytes(buf[pos : pos + length])
            pos += length
        elif wire == 5:
            if pos + 4 > len(buf):
                raise ValueError("fixed32 field runs past the end of the message")
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} (field {field})")
        yield field, wire, value


def to_int64(value: int) -> int:
    """Reinterpret a decoded varint as a signed int64 (negative ints are 10-byte two's-complement varints)."""
    return value - (1 << 64) if value >= 1 << 63 else value
