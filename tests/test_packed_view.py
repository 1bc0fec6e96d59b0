"""``view: packed`` (runtime/packed.py) and the whole-log API (``decode_many_*`` /
``encode_many_*``): a repeated number kept as its bytes on both codec paths, encoded back
unchanged, and compared by value with plain lists."""

from __future__ import annotations

import copy
import math
import pickle
import struct

import numpy as np
import pytest

from bytewright.generated import htt as h
from bytewright.runtime.errors import DecodeError, EncodeError
from bytewright.runtime.packed import PackedArray, packed_kind

from .test_language_generality import both_paths, problems

PACKED = """
bytewright: 1
family: packs
types:
  q64_64: {base: i128, fixed_point: q64.64}
records:
  rec:
    params:
      n: {type: int}
    fields:
      - {name: wide, type: q64_64, repeat: {count: n}, view: packed}
      - {name: be16, type: u16be, repeat: {prefix: u8}, view: packed}
      - {name: vec, type: f32, repeat: {prefix: uleb128}, view: packed}
      - {name: plain, type: u8, repeat: {count: 2}}
"""


def test_kinds_are_shared_and_survive_pickling():
    k = packed_kind("<", "f", 4, True)
    assert packed_kind("<", "f", 4, True) is k
    assert pickle.loads(pickle.dumps(k)) is k
    a = PackedArray(struct.pack("<3f", 1.0, 2.5, -3.0), k)
    b = pickle.loads(pickle.dumps(a))
    assert b == a and b.kind is k
    assert copy.deepcopy(a) == a and copy.copy(a) is a


def test_sequence_behaviour_and_equality():
    k = packed_kind("<", "", 16, True)  # i128: struct has no code
    vals = [0, -1, (1 << 127) - 1, -(1 << 127), 5 << 64]
    a = PackedArray.from_values(vals, k)
    assert len(a) == 5 and a.raw == b"".join(v.to_bytes(16, "little", signed=True) for v in vals)
    assert list(a) == vals and a.tolist() == vals
    assert a[2] == (1 << 127) - 1 and a[-1] == 5 << 64 and a[1:3] == vals[1:3]
    with pytest.raises(IndexError):
        a[5]
    assert a == vals and vals == a and a == tuple(vals) and a != vals[:-1]
    assert PackedArray.from_values(a, k) is a
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(TypeError):
        a.numpy()
    be = PackedArray.from_values([1, 0xABCD], packed_kind(">", "H", 2, False))
    assert be.raw == b"\x00\x01\xab\xcd" and be[1] == 0xABCD
    assert be.numpy().tolist() == [1, 0xABCD] and be.numpy().dtype == np.dtype(">u2")


def test_nan_payloads_compare_bit_exact():
    k = packed_kind("<", "f", 4, True)
    nan1 = PackedArray(b"\x01\x00\xc0\x7f", k)
    nan2 = PackedArray(b"\x02\x00\xc0\x7f", k)
    assert nan1 == PackedArray(b"\x01\x00\xc0\x7f", k)
    assert nan1 != nan2  # different payloads
    assert math.isnan(nan1[0])


def test_packed_fields_on_both_paths(schema_module):
    m = schema_module(PACKED)
    k128 = packed_kind("<", "", 16, True)
    value = m.Rec([1 << 64, -(1 << 100), 3], [1, 65535], [0.5, -2.0, 0.125], [7, 8])
    data = both_paths(m, "rec", value, n=3)
    back, _ = m.decode_rec(data, n=3)
    assert isinstance(back.wide, PackedArray) and back.wide.kind is k128
    assert isinstance(back.be16, PackedArray) and isinstance(back.vec, PackedArray)
    assert isinstance(back.plain, list)
    c = m.construct_decode_rec(data, n=3)
    assert isinstance(c.wide, PackedArray) and c.wide == back.wide
    # what was read is written back unchanged, packed or as lists
    assert m.encode_rec(back, n=3) == data
    assert back.wide.raw == data[:48]
    # a wrong count or an unfit value is an EncodeError naming the field
    with pytest.raises(EncodeError, match="wide"):
        m.encode_rec(m.Rec([1, 2], [1], [0.0], [0, 0]), n=3)
    with pytest.raises(EncodeError):
        m.encode_rec(m.Rec([1, 2, 3], [70000], [0.0], [0, 0]), n=3)


def test_truncated_packed_run_is_a_decode_error(schema_module):
    m = schema_module(PACKED)
    data = m.encode_rec(m.Rec([1, 2, 3], [1], [0.0], [0, 0]), n=3)
    for cut in (10, 47, 49, len(data) - 3):
        with pytest.raises(DecodeError) as exc:
            m.decode_rec(data[:cut], n=3)
        assert exc.value.offset is not None


def test_view_packed_needs_a_repeated_plain_number(tmp_path):
    base = "bytewright: 1\nfamily: bad\nrecords:\n  r:\n    fields:\n"
    for field in ("      - {name: x, type: u32, view: packed}\n",
                  "      - {name: x, type: str, length: u8, repeat: {count: 2}, view: packed}\n",
                  "      - {name: x, type: u8, repeat: {eos: true}, view: packed}\n",
                  "      - {name: x, type: u8, repeat: {count: 2}, view: sparse}\n"):
        got = problems(tmp_path, base + field)
        assert got and any("view" in p for p in got), (field, got)


def test_decode_many_and_encode_many_match_the_single_record_api():
    params = {"semantic_dims": 2, "tail_layout": 0}
    entries = [h.WalEntry(i, h.WalOp.INSERT, f"/k{i}",
                          h.InsertBody(b"x" * i, [h.MetaPair("a", str(i))],
                                       h.TailFull([i << 64, -i]))) for i in range(1, 6)]
    data = h.encode_many_wal_entry(entries, **params)
    assert data == b"".join(h.encode_wal_entry(e, **params) for e in entries)
    got = h.decode_many_wal_entry(data, **params)
    assert got == entries == [v for v, _ in h.iter_wal_entry(data, **params)]
    assert h.encode_many_wal_entry(got, **params) == data
    # a bad record names its index, as iter_ does
    bad = bytearray(data)
    bad[-1] ^= 0xFF
    with pytest.raises(DecodeError) as exc:
        h.decode_many_wal_entry(bytes(bad), **params)
    assert exc.value.path.startswith("wal_entry[4]")
    entries[2].key = 5  # not a str
    with pytest.raises(EncodeError) as exc2:
        h.encode_many_wal_entry(entries, **params)
    assert exc2.value.path.startswith("wal_entry[2]")
