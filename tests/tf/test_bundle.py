"""The TF V2 tensor-bundle reader (litebert.tf.bundle) against real TensorFlow checkpoints, without TensorFlow.

Oracles: ../shared/fixtures/tf/*/arrays.npz and variables.txt (written by TensorFlow 2.15), RFC 3720 CRC32C vectors.
"""

from __future__ import annotations

import json
import shutil
import sys
import types

import numpy as np
import pytest

from litebert.errors import LitebertError
from litebert.tf import bundle as tf_bundle
from litebert.tf.bundle import (
    BundleReader,
    _crc32c_python,
    crc32c,
    mask_crc,
    open_checkpoint,
    read_bundle,
    resolve_prefix,
    unmask_crc,
    write_bundle,
)

FIXTURES = ("a_official_e8_h16", "c_albert_zh_brightmart_e8_h16")
DATA = "model.ckpt.data-00000-of-00001"


def copy_fixture(tf_fixtures, name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(tf_fixtures / name, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


# ---------------------------------------------------------------------------------------------------- CRC32C
# RFC 3720 (iSCSI) B.4 test vectors, plus the classic "123456789" check value.
CRC_VECTORS = [
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"", 0x0),
]


@pytest.mark.parametrize("impl", [crc32c, _crc32c_python], ids=["default", "pure-python"])
def test_crc32c_known_vectors(impl):
    for data, want in CRC_VECTORS:
        assert impl(data) == want
        assert impl(bytearray(data)) == want
        assert impl(memoryview(data)) == want


def test_crc32c_chunked_path_agrees(monkeypatch):
    data = np.random.RandomState(0).bytes(5000)
    want = _crc32c_python(data)
    monkeypatch.setattr(tf_bundle, "_CHUNK", 7, raising=False)  # many chunks through google-crc32c's extend()
    assert crc32c(bytearray(data)) == crc32c(data) == want


def test_mask_roundtrip():
    for data, _ in CRC_VECTORS:
        crc = crc32c(data)
        assert unmask_crc(mask_crc(crc)) == crc
        if crc:
            assert mask_crc(crc) != crc
    assert mask_crc(0) == 0xA282EAD8


# ---------------------------------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize("name", FIXTURES)
def test_reader_returns_exactly_arrays_npz(tf_fixtures, name):
    expected = np.load(tf_fixtures / name / "arrays.npz")
    got = read_bundle(tf_fixtures / name / "model.ckpt", backend="native")
    assert list(got) == sorted(expected.files, key=str.encode)
    for key in expected.files:
        assert got[key].dtype == expected[key].dtype, key
        assert got[key].shape == expected[key].shape, key
        assert got[key].tobytes() == expected[key].tobytes(), key
    assert got["global_step"].dtype == np.int64 and got["global_step"].shape == ()


@pytest.mark.parametrize("name", FIXTURES)
def test_variables_match_tf_list_variables(tf_fixtures, name):
    lines = (tf_fixtures / name / "variables.txt").read_text().splitlines()
    want = [(n, tuple(json.loads(s))) for n, s in (line.split("\t") for line in lines if line)]
    reader = BundleReader(tf_fixtures / name / "model.ckpt")
    got = [(n, shape) for n, (shape, _dtype) in reader.variables().items()]
    assert got == want  # same names, TF's byte order, same shapes
    assert reader.num_shards == 1 and reader.little_endian


@pytest.mark.parametrize("name", FIXTURES)
def test_writer_reproduces_tensorflow_files_byte_for_byte(tf_fixtures, name, tmp_path):
    arrays = dict(np.load(tf_fixtures / name / "arrays.npz"))
    write_bundle(tmp_path / "m", arrays)
    assert (tmp_path / "m.index").read_bytes() == (tf_fixtures / name / "model.ckpt.index").read_bytes()
    assert (tmp_path / "m.data-00000-of-00001").read_bytes() == (tf_fixtures / name / DATA).read_bytes()


def test_resolve_prefix_forms(tf_fixtures):
    d = tf_fixtures / FIXTURES[0]
    prefix = str(d / "model.ckpt")
    assert resolve_prefix(prefix) == prefix
    assert resolve_prefix(prefix + ".index") == prefix
    assert resolve_prefix(d / DATA) == prefix
    assert resolve_prefix(d) == prefix  # the directory's only *.index


def test_checkpoint_state_file_is_followed(tf_fixtures, tmp_path):
    d = copy_fixture(tf_fixtures, FIXTURES[0], tmp_path)
    shutil.copy(d / "model.ckpt.index", d / "other.ckpt.index")
    with pytest.raises(LitebertError, match="several checkpoints"):
        resolve_prefix(d)
    (d / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\nall_model_checkpoint_paths: "model.ckpt"\n')
    assert resolve_prefix(d) == str(d / "model.ckpt")


# ---------------------------------------------------------------------------------------------------- bad input
def test_prefix_without_index(tmp_path):
    with pytest.raises(LitebertError, match=r"nothere\.index not found"):
        open_checkpoint(tmp_path / "nothere", backend="native")
    with pytest.raises(LitebertError, match="no TensorFlow checkpoint"):
        open_checkpoint(tmp_path, backend="native")
    meta = tmp_path / "model.ckpt.meta"
    meta.write_bytes(b"graph")
    with pytest.raises(LitebertError, match="graph, not the weights"):
        open_checkpoint(meta, backend="native")


def test_truncated_data_file_names_file_and_variable(tf_fixtures, tmp_path):
    d = copy_fixture(tf_fixtures, FIXTURES[0], tmp_path)
    data = d / DATA
    data.write_bytes(data.read_bytes()[:20000])
    reader = BundleReader(d / "model.ckpt")
    assert reader.get_tensor("bert/embeddings/word_embeddings").shape == (64, 8)  # bytes before the cut still read
    with pytest.raises(LitebertError) as err:
        read_bundle(d / "model.ckpt", backend="native")
    msg = str(err.value)
    assert str(data) in msg and "truncated" in msg
    assert "'bert/pooler/dense/kernel/lamb_m'" in msg  # the first variable past byte 20000


def test_bit_flip_in_data_is_a_crc_error(tf_fixtures, tmp_path):
    d = copy_fixture(tf_fixtures, FIXTURES[0], tmp_path)
    data = d / DATA
    reader = BundleReader(d / "model.ckpt")
    entry = reader.entries["bert/pooler/dense/kernel"]
    raw = bytearray(data.read_bytes())
    raw[entry.offset + 17] ^= 0x04
    data.write_bytes(bytes(raw))
    with pytest.raises(LitebertError) as err:
        reader.get_tensor("bert/pooler/dense/kernel")
    msg = str(err.value)
    assert "CRC32C mismatch" in msg and "'bert/pooler/dense/kernel'" in msg and str(data) in msg
    reader.get_tensor("bert/pooler/dense/bias")  # its neighbours are intact


def test_bit_flip_in_index_is_a_crc_error(tf_fixtures, tmp_path):
    d = copy_fixture(tf_fixtures, FIXTURES[1], tmp_path)
    index = d / "model.ckpt.index"
    raw = bytearray(index.read_bytes())
    raw[100] ^= 0x01  # inside the data block
    index.write_bytes(bytes(raw))
    with pytest.raises(LitebertError, match=r"model\.ckpt\.index: CRC32C mismatch in the data block"):
        BundleReader(d / "model.ckpt")


def test_truncated_index_is_a_clear_error(tf_fixtures, tmp_path):
    d = copy_fixture(tf_fixtures, FIXTURES[0], tmp_path)
    index = d / "model.ckpt.index"
    index.write_bytes(index.read_bytes()[:-10])
    with pytest.raises(LitebertError, match="not a TensorFlow V2 checkpoint index"):
        BundleReader(d / "model.ckpt")


def test_missing_data_shard(tf_fixtures, tmp_path):
    d = copy_fixture(tf_fixtures, FIXTURES[0], tmp_path)
    (d / DATA).unlink()
    reader = BundleReader(d / "model.ckpt")  # the index alone opens (listing works)
    assert len(reader.variables()) == 43
    with pytest.raises(LitebertError, match=r"data-00000-of-00001 not found \(needed for variable 'bert/"):
        reader.get_tensor("bert/embeddings/LayerNorm/beta")


def test_unknown_variable_name(tf_fixtures):
    reader = BundleReader(tf_fixtures / FIXTURES[0] / "model.ckpt")
    with pytest.raises(LitebertError, match="no variable named 'bert/nope'"):
        reader.get_tensor("bert/nope")


# ---------------------------------------------------------------------------------------------------- dtypes
def test_roundtrip_dtypes_shapes_and_many_entries(tmp_path):
    rng = np.random.RandomState(0)
    arrays = {
        "f64": rng.standard_normal((3, 2)),
        "f16": rng.standard_normal(5).astype(np.float16),
        "i32": np.arange(-3, 3, dtype=np.int32).reshape(2, 3),
        "u8": np.arange(7, dtype=np.uint8),
        "flag": np.array([True, False]),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "big_i64": np.array([2**62, -(2**62)], dtype=np.int64),
    }
    # > 16 keys sharing long prefixes: exercises prefix compression across several restart points
    for i in range(40):
        arrays[f"bert/encoder/transformer/group_{i}/inner_group_0/w"] = rng.standard_normal((i % 3 + 1, 2)).astype(
            np.float32
        )
    write_bundle(tmp_path / "x", arrays)
    got = read_bundle(tmp_path / "x", backend="native")
    assert set(got) == set(arrays)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and got[k].tobytes() == v.tobytes(), k
        assert got[k].flags.writeable


def test_bfloat16_widens_exactly():
    bits = np.array([0x3F80, 0xC000, 0x0000, 0x7F80], dtype="<u2")  # 1.0, -2.0, 0.0, inf
    out = tf_bundle._decode_tensor(bytearray(bits.tobytes()), 14, (2, 2), True)
    assert out.dtype == np.float32
    assert out.ravel().tolist() == [1.0, -2.0, 0.0, float("inf")]


def test_big_endian_bundle_is_byteswapped():
    raw = bytearray(np.arange(4, dtype=">f4").tobytes())
    out = tf_bundle._decode_tensor(raw, 1, (4,), False)
    assert out.dtype == np.float32 and out.tolist() == [0.0, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------------------------------------------- TF backend
def test_tensorflow_backend_adapter(tf_fixtures, monkeypatch):
    """With TensorFlow installed, ``backend="auto"`` goes through ``tf.train.load_checkpoint``; a stand-in module
    (backed by the native reader) checks the adapter's contract without installing TensorFlow."""
    prefix = str(tf_fixtures / FIXTURES[0] / "model.ckpt")

    class FakeDType:
        def __init__(self, np_dtype):
            self.as_numpy_dtype = np_dtype

    class FakeTFReader:
        def __init__(self, p):
            self._r = BundleReader(p)

        def get_variable_to_shape_map(self):
            return {n: list(s) for n, (s, _) in self._r.variables().items()}

        def get_variable_to_dtype_map(self):
            return {n: FakeDType(np.dtype(d).type) for n, (_, d) in self._r.variables().items()}

        def get_tensor(self, name):
            return self._r.get_tensor(name)

    fake = types.ModuleType("tensorflow")
    fake.train = types.SimpleNamespace(load_checkpoint=FakeTFReader)
    monkeypatch.setitem(sys.modules, "tensorflow", fake)
    monkeypatch.setattr(tf_bundle, "tensorflow_available", lambda: True)
    reader = open_checkpoint(prefix)  # auto -> tensorflow
    assert isinstance(reader, tf_bundle.TensorFlowReader)
    native = BundleReader(prefix)
    assert reader.variables() == native.variables()
    for name in native.variables():
        assert reader.get_tensor(name).tobytes() == native.get_tensor(name).tobytes()
    with pytest.raises(LitebertError, match="no variable named"):
        reader.get_tensor("nope")


def test_unknown_backend(tf_fixtures):
    with pytest.raises(LitebertError, match="unknown checkpoint reader backend"):
        open_checkpoint(tf_fixtures / FIXTURES[0] / "model.ckpt", backend="pytorch")
