"""Read TensorFlow "V2" checkpoints (tensor bundles) without TensorFlow.

A checkpoint with prefix ``PREFIX`` is ``PREFIX.index`` plus ``PREFIX.data-SSSSS-of-NNNNN`` shards. Sources:
TensorFlow ``core/util/tensor_bundle/tensor_bundle.{h,cc,proto}`` (the bundle), ``core/lib/io/{table,block,
format}.cc`` (the index, a LevelDB-format SSTable) and ``core/lib/hash/crc32c.h`` (masked CRC32C).

- ``PREFIX.index`` is an SSTable. Its last 48 bytes are the footer: varint block handles (offset, size) of the
  metaindex and index blocks, zero padding, and the magic ``0xdb4775248b80fb57`` (little-endian). Each block is
  followed by a 5-byte trailer: a compression byte (0 = none; TensorFlow writes bundle indexes uncompressed) and
  the masked CRC32C of the block plus that byte. A block holds prefix-compressed entries
  (``shared``, ``non_shared``, ``value_length`` varints, key suffix, value) then a restart array. The index block
  maps separator keys to the handles of the data blocks; the data blocks map keys to values.
- Key ``""`` holds a ``BundleHeaderProto`` (1 num_shards, 2 endianness: 0 little / 1 big, 3 version). Every other
  key is a tensor name; its value is a ``BundleEntryProto`` (1 dtype, 2 shape ``TensorShapeProto``, 3 shard_id,
  4 offset, 5 size, 6 crc32c as fixed32 = masked CRC32C of the raw bytes, 7 slices).
- The data shard holds the raw row-major bytes in the header's byte order.

When TensorFlow is installed, :func:`open_checkpoint` uses TensorFlow's own reader (``backend="auto"``);
otherwise, or with ``backend="native"``, it uses :class:`BundleReader` below. Both return arrays with the same
names, shapes, dtypes and bytes. The native reader checks every CRC it meets: index blocks when it opens the
checkpoint, a tensor's bytes when it reads that tensor.
"""

from __future__ import annotations

import importlib.util
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from litebert.errors import LitebertError
from litebert.fileio import atomic_write_bytes
from litebert.protowire import decode_varint, proto_fields, to_int64

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48  # 2 block handles of at most 20 bytes each, padded, plus the 8-byte magic
BLOCK_TRAILER_SIZE = 5  # compression type byte + fixed32 masked CRC32C
_MASK_DELTA = 0xA282EAD8

# TensorFlow DataType enum (tensorflow/core/framework/types.proto) -> numpy dtype. DT_BFLOAT16 (14) has no numpy
# dtype: it is read as its 16-bit pattern and widened exactly to float32 (see _decode_tensor).
_TF_DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),  # DT_FLOAT
    2: np.dtype("<f8"),  # DT_DOUBLE
    3: np.dtype("<i4"),  # DT_INT32
    4: np.dtype("u1"),  # DT_UINT8
    5: np.dtype("<i2"),  # DT_INT16
    6: np.dtype("i1"),  # DT_INT8
    8: np.dtype("<c8"),  # DT_COMPLEX64
    9: np.dtype("<i8"),  # DT_INT64
    10: np.dtype("?"),  # DT_BOOL
    17: np.dtype("<u2"),  # DT_UINT16
    18: np.dtype("<c16"),  # DT_COMPLEX128
    19: np.dtype("<f2"),  # DT_HALF
    22: np.dtype("<u4"),  # DT_UINT32
    23: np.dtype("<u8"),  # DT_UINT64
}
_DT_BFLOAT16 = 14
_TF_DTYPE_NAMES = {7: "DT_STRING", 14: "DT_BFLOAT16", 20: "DT_RESOURCE", 21: "DT_VARIANT"}


# --------------------------------------------------------------------------------------------------------------
# CRC32C (Castagnoli), as TensorFlow and LevelDB use it
# --------------------------------------------------------------------------------------------------------------


def _make_crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _make_crc32c_table()


def _crc32c_python(data: bytes | bytearray | memoryview) -> int:
    """Bytewise table CRC32C; correct but slow (a few MB/s). Used only when ``google-crc32c`` is missing."""
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # google-crc32c: C implementation (hardware CRC where available), pure-Python fallback inside it
    import google_crc32c as _google_crc32c

    _CHUNK = 1 << 24

    def crc32c(data: bytes | bytearray | memoryview) -> int:
        """CRC32C (Castagnoli) of ``data`` as an unsigned 32-bit int; ``crc32c(b"123456789") == 0xE3069283``."""
        if isinstance(data, bytes):
            return int(_google_crc32c.value(data))
        # google-crc32c takes only ``bytes``: copy 16 MiB at a time rather than the whole tensor at once.
        view = memoryview(data).cast("B")
        crc = 0
        for start in range(0, len(view), _CHUNK):
            crc = _google_crc32c.extend(crc, bytes(view[start : start + _CHUNK]))
        return int(crc)

except ImportError:  # pragma: no cover - exercised only where the dependency is absent
    crc32c = _crc32c_python


def mask_crc(crc: int) -> int:
    """TensorFlow/LevelDB CRC mask: rotate right by 15 bits and add ``0xa282ead8`` (mod 2**32)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    """Inverse of :func:`mask_crc`."""
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# --------------------------------------------------------------------------------------------------------------
# bundle entries
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleEntry:
    """One tensor's ``BundleEntryProto``: where its bytes are and what they are.

    ``dtype`` is TensorFlow's DataType enum value (1 = DT_FLOAT, 9 = DT_INT64, ...); ``shape`` a tuple of ints
    (``()`` for a scalar); ``offset``/``size`` in bytes inside data shard ``shard_id``; ``crc32c`` the masked
    CRC32C of those bytes as stored; ``sliced`` True for a partitioned variable (stored as slices, unsupported).
    """

    name: str
    dtype: int
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int
    sliced: bool = False

    @property
    def numpy_dtype(self) -> np.dtype | None:
        """The numpy dtype of the array this entry reads as (float32 for bfloat16); None if unsupported."""
        if self.dtype == _DT_BFLOAT16:
            return np.dtype("float32")
        return _TF_DTYPES.get(self.dtype)

    @property
    def dtype_name(self) -> str:
        """A readable dtype (``float32``, ``int64``, ``DT_STRING``...)."""
        npd = self.numpy_dtype
        return str(npd) if npd is not None else _TF_DTYPE_NAMES.get(self.dtype, f"TF dtype {self.dtype}")


def _parse_shape(buf: bytes) -> tuple[int, ...]:
    dims = []
    for field, _, value in proto_fields(buf):
        if field == 2:  # repeated Dim dim
            size = 0
            for dfield, _, dvalue in proto_fields(value):
                if dfield == 1:
                    size = to_int64(dvalue)
            dims.append(size)
        elif field == 3 and value:  # unknown_rank
            raise ValueError("tensor shape has unknown rank")
    return tuple(dims)


def _parse_entry(name: str, buf: bytes) -> BundleEntry:
    fields = {"dtype": 0, "shape": (), "shard_id": 0, "offset": 0, "size": 0, "crc32c": 0, "sliced": False}
    for field, _, value in proto_fields(buf):
        if field == 1:
            fields["dtype"] = value
        elif field == 2:
            fields["shape"] = _parse_shape(value)
        elif field == 3:
            fields["shard_id"] = value
        elif field == 4:
            fields["offset"] = to_int64(value)
        elif field == 5:
            fields["size"] = to_int64(value)
        elif field == 6:
            fields["crc32c"] = value
        elif field == 7:
            fields["sliced"] = True
    return BundleEntry(name=name, **fields)


# --------------------------------------------------------------------------------------------------------------
# SSTable (the .index file)
# --------------------------------------------------------------------------------------------------------------


def _read_block(data: bytes, offset: int, size: int, path: Path, what: str) -> bytes:
    end = offset + size + BLOCK_TRAILER_SIZE
    if offset < 0 or end > len(data):
        raise LitebertError(
            f"{path}: {what} block [{offset}, {offset + size}) lies outside the {len(data)}-byte file (truncated index?)"
        )
    block = data[offset : offset + size]
    ctype = data[offset + size]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if unmask_crc(stored) != crc32c(data[offset : offset + size + 1]):
        raise LitebertError(f"{path}: CRC32C mismatch in the {what} block at byte {offset} (the index file is corrupt)")
    if ctype != 0:
        kind = {1: "snappy", 2: "zlib"}.get(ctype, f"type {ctype}")
        raise LitebertError(
            f"{path}: {what} block is {kind}-compressed; only uncompressed bundle indexes (what TensorFlow writes) are supported"
        )
    return block


def _block_entries(block: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Yield (key, value) of an SSTable block, undoing the key prefix compression."""
    if len(block) < 4:
        raise ValueError("block shorter than its restart count")
    (num_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    limit = len(block) - 4 * (num_restarts + 1)
    if limit < 0:
        raise ValueError("restart array larger than the block")
    pos = 0
    key = b""
    while pos < limit:
        shared, pos = decode_varint(block, pos)
        non_shared, pos = decode_varint(block, pos)
        value_len, pos = decode_varint(block, pos)
        if shared > len(key) or pos + non_shared + value_len > limit:
            raise ValueError("block entry runs past the block")
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        yield key, block[pos : pos + value_len]
        pos += value_len


def _read_table(path: Path) -> list[tuple[bytes, bytes]]:
    """All (key, value) pairs of the SSTable at ``path``, in key order, every block CRC checked."""
    data = path.read_bytes()
    if len(data) < FOOTER_SIZE:
        raise LitebertError(
            f"{path}: {len(data)} bytes is too short for a TensorFlow checkpoint index (footer is {FOOTER_SIZE} bytes)"
        )
    footer = data[-FOOTER_SIZE:]
    (magic,) = struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)
    if magic != TABLE_MAGIC:
        raise LitebertError(
            f"{path}: not a TensorFlow V2 checkpoint index (bad table magic {magic:#018x}; truncated or another format)"
        )
    try:
        _meta_off, pos = decode_varint(footer, 0)
        _meta_size, pos = decode_varint(footer, pos)
        index_off, pos = decode_varint(footer, pos)
        index_size, pos = decode_varint(footer, pos)
    except ValueError as exc:
        raise LitebertError(f"{path}: corrupt index footer ({exc})") from None
    index_block = _read_block(data, index_off, index_size, path, "index")
    pairs: list[tuple[bytes, bytes]] = []
    try:
        for _sep, handle in _block_entries(index_block):
            off, hpos = decode_varint(handle, 0)
            size, _ = decode_varint(handle, hpos)
            block = _read_block(data, off, size, path, "data")
            pairs.extend(_block_entries(block))
    except ValueError as exc:
        raise LitebertError(f"{path}: corrupt index block ({exc})") from None
    return pairs


# --------------------------------------------------------------------------------------------------------------
# the reader
# --------------------------------------------------------------------------------------------------------------


class CheckpointReader(Protocol):
    """What the converter needs from a checkpoint reader (native or TensorFlow)."""

    prefix: str

    def variables(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """name -> (shape, dtype name), sorted by name."""

    def get_tensor(self, name: str) -> np.ndarray:
        """The named tensor as a new numpy array."""


def resolve_prefix(path: str | os.PathLike) -> str:
    """Turn what a user passes into a checkpoint prefix.

    Accepts the prefix itself (``.../model.ckpt-best``), its ``.index`` or a ``.data-*`` file, or a directory that
    has a TF ``checkpoint`` state file or exactly one ``*.index`` file. Raises :class:`LitebertError` naming the
    path when there is no ``PREFIX.index``.
    """
    p = Path(path)
    text = str(p)
    if text.endswith(".index"):
        text = text[: -len(".index")]
    elif ".data-" in p.name:
        text = str(p.parent / p.name.split(".data-")[0])
    p = Path(text)
    if p.is_dir():
        state = p / "checkpoint"
        if state.is_file():
            for line in state.read_text(errors="replace").splitlines():
                if line.startswith("model_checkpoint_path:"):
                    name = line.split(":", 1)[1].strip().strip('"')
                    cand = Path(name) if os.path.isabs(name) else p / name
                    if Path(str(cand) + ".index").is_file():
                        return str(cand)
        indexes = sorted(p.glob("*.index"))
        if len(indexes) == 1:
            return str(indexes[0])[: -len(".index")]
        if len(indexes) > 1:
            names = ", ".join(i.name for i in indexes)
            raise LitebertError(
                f"{p}: several checkpoints in this directory ({names}); pass one prefix, e.g. {str(indexes[0])[:-6]}"
            )
        raise LitebertError(f"{p}: directory holds no TensorFlow checkpoint (no *.index file)")
    if not Path(text + ".index").is_file():
        hint = ""
        if p.is_file() and p.suffix == ".meta":
            hint = " (a .meta file is the graph, not the weights)"
        elif p.is_file():
            hint = " (a TF1 'V1' single-file checkpoint is not supported; re-save it as V2)"
        raise LitebertError(f"{text}.index not found: {text} is not the prefix of a TensorFlow V2 checkpoint{hint}")
    return text


class BundleReader:
    """Pure-Python reader of a TF V2 tensor bundle.

    ``BundleReader(prefix)`` parses and CRC-checks ``prefix.index`` at once; tensors are read lazily by
    :meth:`get_tensor`, which checks the stored CRC32C of their bytes. Errors (missing, truncated or corrupt
    files, unsupported dtypes, sliced variables) raise :class:`LitebertError` naming the file and the variable.
    """

    def __init__(self, prefix: str | os.PathLike):
        self.prefix = str(prefix)
        index_path = Path(self.prefix + ".index")
        if not index_path.is_file():
            raise LitebertError(
                f"{index_path} not found: {self.prefix} is not the prefix of a TensorFlow V2 checkpoint"
            )
        self.index_path = index_path
        self.num_shards = 1
        self.little_endian = True
        self.entries: dict[str, BundleEntry] = {}
        saw_header = False
        for key, value in _read_table(index_path):
            try:
                if key == b"":
                    saw_header = True
                    for field, _, v in proto_fields(value):
                        if field == 1:
                            self.num_shards = int(v)
                        elif field == 2:
                            self.little_endian = v == 0
                    continue
                name = key.decode("utf-8")
                self.entries[name] = _parse_entry(name, value)
            except (ValueError, UnicodeDecodeError) as exc:
                raise LitebertError(f"{index_path}: corrupt entry {key!r} ({exc})") from None
        if not saw_header:
            raise LitebertError(f"{index_path}: no bundle header (empty key); not a TensorFlow V2 checkpoint index")

    def shard_path(self, shard_id: int) -> Path:
        """``PREFIX.data-SSSSS-of-NNNNN`` for ``shard_id``."""
        return Path(f"{self.prefix}.data-{shard_id:05d}-of-{self.num_shards:05d}")

    def variables(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """name -> (shape, dtype name) of every tensor in the bundle, sorted by name (byte order, as TF lists)."""
        return {n: (e.shape, e.dtype_name) for n, e in sorted(self.entries.items(), key=lambda kv: kv[0].encode())}

    def get_tensor(self, name: str) -> np.ndarray:
        """Read tensor ``name`` as a new, writable numpy array in native byte order.

        Shape is the stored shape; dtype the stored dtype (``float32`` for DT_FLOAT, ``int64`` for DT_INT64,
        ...; DT_BFLOAT16 is widened exactly to float32). Raises :class:`LitebertError` for an unknown name, a
        missing or short data file, a CRC32C mismatch, a sliced (partitioned) variable or an unsupported dtype.
        """
        entry = self.entries.get(name)
        if entry is None:
            raise LitebertError(f"{self.index_path}: no variable named {name!r}")
        path = self.shard_path(entry.shard_id)
        where = f"variable {name!r} in {path}"
        if entry.sliced:
            raise LitebertError(f"{where}: stored as slices of a partitioned variable, which is not supported")
        if entry.dtype != _DT_BFLOAT16 and entry.dtype not in _TF_DTYPES:
            raise LitebertError(f"{where}: unsupported dtype {entry.dtype_name}")
        itemsize = 2 if entry.dtype == _DT_BFLOAT16 else _TF_DTYPES[entry.dtype].itemsize
        count = int(np.prod(entry.shape, dtype=np.int64))
        if count * itemsize != entry.size:
            raise LitebertError(
                f"{where}: index says {entry.size} bytes but shape {list(entry.shape)} of "
                f"{entry.dtype_name} needs {count * itemsize}"
            )
        if not path.is_file():
            raise LitebertError(
                f"{path} not found (needed for variable {name!r}); the checkpoint has {self.num_shards} data shard(s)"
            )
        buf = bytearray(entry.size)
        with open(path, "rb") as f:
            f.seek(entry.offset)
            got = f.readinto(buf)
        if got != entry.size:
            file_size = path.stat().st_size
            raise LitebertError(
                f"{where}: data file is truncated ({file_size} bytes; the variable needs bytes "
                f"[{entry.offset}, {entry.offset + entry.size}))"
            )
        computed, stored = crc32c(buf), unmask_crc(entry.crc32c)
        if computed != stored:
            raise LitebertError(
                f"{where}: CRC32C mismatch (stored {stored:#010x}, computed {computed:#010x}); the data file is corrupt"
            )
        return _decode_tensor(buf, entry.dtype, entry.shape, self.little_endian)


def _decode_tensor(buf: bytearray, dtype: int, shape: tuple[int, ...], little_endian: bool) -> np.ndarray:
    if dtype == _DT_BFLOAT16:
        bits = np.frombuffer(buf, dtype="<u2" if little_endian else ">u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    npd = _TF_DTYPES[dtype]
    if not little_endian:
        npd = npd.newbyteorder(">")
    arr = np.frombuffer(buf, dtype=npd).reshape(shape)
    if not little_endian:
        arr = arr.astype(npd.newbyteorder("="))
    return arr


class TensorFlowReader:
    """Adapter over TensorFlow's ``tf.train.load_checkpoint``; used only when TensorFlow is installed."""

    def __init__(self, prefix: str | os.PathLike):
        import tensorflow as tf  # here: optional and heavy

        self.prefix = str(prefix)
        try:
            self._reader = tf.train.load_checkpoint(self.prefix)
        except Exception as exc:  # TF raises its own error types (NotFoundError, DataLossError, ...)
            raise LitebertError(f"{self.prefix}: TensorFlow could not open the checkpoint: {exc}") from None
        self._shapes = self._reader.get_variable_to_shape_map()
        self._dtypes = self._reader.get_variable_to_dtype_map()

    def variables(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return {
            n: (tuple(int(d) for d in self._shapes[n]), np.dtype(self._dtypes[n].as_numpy_dtype).name)
            for n in sorted(self._shapes, key=str.encode)
        }

    def get_tensor(self, name: str) -> np.ndarray:
        if name not in self._shapes:
            raise LitebertError(f"{self.prefix}.index: no variable named {name!r}")
        try:
            return np.array(self._reader.get_tensor(name))
        except Exception as exc:
            raise LitebertError(
                f"variable {name!r} in {self.prefix}.data-*: TensorFlow could not read it: {exc}"
            ) from None


def tensorflow_available() -> bool:
    """True when ``import tensorflow`` would find a package (it is not imported here)."""
    return importlib.util.find_spec("tensorflow") is not None


def open_checkpoint(path: str | os.PathLike, backend: str = "auto") -> CheckpointReader:
    """Open a TF V2 checkpoint for reading.

    ``path``: a prefix, its ``.index``/``.data-*`` file, or a directory (see :func:`resolve_prefix`).
    ``backend``: ``"native"`` (:class:`BundleReader`), ``"tensorflow"`` (:class:`TensorFlowReader`), or ``"auto"``
    (TensorFlow when installed, else native). Raises :class:`LitebertError` for a missing or corrupt index.
    """
    prefix = resolve_prefix(path)
    if backend == "auto":
        backend = "tensorflow" if tensorflow_available() else "native"
    if backend == "native":
        return BundleReader(prefix)
    if backend == "tensorflow":
        return TensorFlowReader(prefix)
    raise LitebertError(f"unknown checkpoint reader backend {backend!r}; expected auto, native or tensorflow")


def read_bundle(path: str | os.PathLike, backend: str = "auto") -> dict[str, np.ndarray]:
    """Every tensor of a TF V2 checkpoint: name -> numpy array (stored shape and dtype), sorted by name.

    Reads slots and ``global_step`` too; the converter reads only the tensors it needs instead. Raises
    :class:`LitebertError` as :func:`open_checkpoint` and :meth:`BundleReader.get_tensor` do.
    """
    reader = open_checkpoint(path, backend=backend)
    return {name: reader.get_tensor(name) for name in reader.variables()}


# --------------------------------------------------------------------------------------------------------------
# writer (small; used to build test checkpoints)
# --------------------------------------------------------------------------------------------------------------

_NUMPY_TO_TF = {
    np.dtype(v).newbyteorder("<") if np.dtype(v).itemsize > 1 else np.dtype(v): k for k, v in _TF_DTYPES.items()
}


def _put_varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _proto_varint(field: int, value: int) -> bytes:
    return _put_varint(field << 3) + _put_varint(value) if value else b""


def _proto_bytes(field: int, value: bytes) -> bytes:
    return _put_varint(field << 3 | 2) + _put_varint(len(value)) + value


def _build_block(pairs: list[tuple[bytes, bytes]], restart_interval: int = 16) -> bytes:
    out = bytearray()
    restarts = [0]
    last = b""
    for i, (key, value) in enumerate(pairs):
        if i and i % restart_interval == 0:
            restarts.append(len(out))
            last = b""
        shared = 0
        while shared < min(len(last), len(key)) and last[shared] == key[shared]:
            shared += 1
        out += _put_varint(shared) + _put_varint(len(key) - shared) + _put_varint(len(value))
        out += key[shared:] + value
        last = key
    for r in restarts:
        out += struct.pack("<I", r)
    out += struct.pack("<I", len(restarts))
    return bytes(out)


def _short_successor(key: bytes) -> bytes:
    for i, byte in enumerate(key):
        if byte != 0xFF:
            return key[:i] + bytes([byte + 1])
    return key


def write_bundle(prefix: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` (name -> numpy array) as a one-shard TF V2 checkpoint ``prefix.index`` +
    ``prefix.data-00000-of-00001``, the way TensorFlow's ``BundleWriter`` does: tensors in name order, contiguous,
    little-endian, each with its masked CRC32C; an uncompressed SSTable index with one data block (restart
    interval 16), an empty metaindex block and the 48-byte footer. For the single-block case this reproduces
    TensorFlow's files byte for byte (tests check it on the fixtures). Supported dtypes: those of
    ``_TF_DTYPES`` (not bfloat16 or strings); raises LitebertError otherwise.
    """
    prefix = str(prefix)
    names = sorted(arrays, key=str.encode)
    data = bytearray()
    pairs: list[tuple[bytes, bytes]] = [(b"", _proto_varint(1, 1) + _proto_bytes(3, _proto_varint(1, 1)))]
    for name in names:
        arr = np.asarray(arrays[name])
        dt = arr.dtype.newbyteorder("<") if arr.dtype.itemsize > 1 else arr.dtype
        if dt not in _NUMPY_TO_TF:
            raise LitebertError(f"write_bundle: variable {name!r} has unsupported dtype {arr.dtype}")
        raw = np.ascontiguousarray(arr, dtype=dt).tobytes()
        shape = b"".join(_proto_bytes(2, _proto_varint(1, d)) for d in arr.shape)
        entry = (
            _proto_varint(1, _NUMPY_TO_TF[dt])
            + _proto_bytes(2, shape)
            + _proto_varint(4, len(data))
            + _proto_varint(5, len(raw))
            + struct.pack("<B", 6 << 3 | 5)
            + struct.pack("<I", mask_crc(crc32c(raw)))
        )
        pairs.append((name.encode("utf-8"), entry))
        data += raw
    atomic_write_bytes(f"{prefix}.data-00000-of-00001", bytes(data))

    table = bytearray()

    def add_block(block: bytes) -> bytes:
        handle = _put_varint(len(table)) + _put_varint(len(block))
        trailer = b"\x00"
        table.extend(block + trailer + struct.pack("<I", mask_crc(crc32c(block + trailer))))
        return handle

    data_handle = add_block(_build_block(pairs))
    meta_handle = add_block(_build_block([]))
    index_handle = add_block(_build_block([(_short_successor(pairs[-1][0]), data_handle)], restart_interval=1))
    footer = meta_handle + index_handle
    footer += b"\x00" * (FOOTER_SIZE - 8 - len(footer)) + struct.pack("<Q", TABLE_MAGIC)
    table += footer
    atomic_write_bytes(f"{prefix}.index", bytes(table))  # last: a reader looks for .index first
