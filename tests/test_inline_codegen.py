"""Sub-records inlined at their call sites and checksums bound to C callables:
the inlined forms must decode and encode exactly what the calls did, with the
same errors, offsets and paths."""

from __future__ import annotations

import inspect
import zlib

import pytest

from bytewright.generated import htt as h
from bytewright.runtime import registry
from bytewright.runtime.errors import ChecksumError, DecodeError, EncodeError, TruncatedError

INL = """
bytewright: 1
family: inl
records:
  inner:
    params: {k: {type: int}}
    fields:
      - {name: data, type: bytes, length: u8}
      - {name: vals, type: u16, repeat: {count: k}}
  other:
    fields:
      - {name: x, type: u32}
  outer:
    fields:
      - {name: kind, type: u8}
      - {name: n, type: u8}
      - {name: data, type: bytes, length: u8}
      - name: body
        switch: kind
        cases: {1: inner, 2: other, 3: empty}
        args: {k: "n + 1"}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: preceding}}
"""


def test_wal_entry_bodies_and_tails_are_inlined():
    # the op switch's bodies and the insert body's tail switch run without a call in the
    # decoders that read (the optimistic twins) and in the encoders
    for fn in (h._u_wal_entry, h._m_wal_entry):
        src = inspect.getsource(fn)
        assert "insert_body(" not in src and "tail_full(" not in src, fn.__name__
    assert "_e_insert_body(" not in inspect.getsource(h._e_wal_entry)
    # the checked decoder, run only where the twin could not read, calls them
    assert "_d_insert_body(" in inspect.getsource(h._d_wal_entry)


def test_inlined_switch_case_same_values_and_errors(schema_module):
    m = schema_module(INL)
    assert "inner(" not in inspect.getsource(m._u_outer)  # really inlined in the twin
    assert "_d_inner(" in inspect.getsource(m._d_outer)  # the checked decoder calls
    # caller and callee both have a field "data": the inlined locals must not collide
    v = m.Outer(1, 2, b"outer", m.Inner(b"in", [1, 2, 0xFFFF]))
    data = m.encode_outer(v)
    assert m.decode_outer(data) == (v, len(data))
    assert zlib.crc32(data[:-4]) == int.from_bytes(data[-4:], "little")
    w = m.Outer(2, 0, b"", m.Other(7))
    assert m.decode_outer(m.encode_outer(w))[0] == w
    # the arg "n + 1" is evaluated once, with the caller's n
    with pytest.raises(EncodeError) as info:
        m.encode_outer(m.Outer(1, 5, b"", m.Inner(b"", [1])))
    assert info.value.path.endswith("vals")
    with pytest.raises(TruncatedError) as info:
        m.decode_outer(data[:-7])  # cut inside body.vals
    assert info.value.path == "outer.body.vals"
    assert info.value.offset == 2 + 1 + 5 + 1 + 2
    bad = bytearray(data)
    bad[-1] ^= 1
    with pytest.raises(ChecksumError) as info:
        m.decode_outer(bytes(bad))
    assert info.value.path == "outer.crc"


def test_insert_entry_errors_keep_paths_and_offsets():
    e = h.WalEntry(5, h.WalOp.INSERT, "/k", h.InsertBody(b"abc", [h.MetaPair("a", "b")],
                                                         h.TailFull([1, -2, 3])))
    b = h.encode_wal_entry(e, semantic_dims=3, tail_layout=0)
    assert h.decode_wal_entry(b, semantic_dims=3, tail_layout=0) == (e, len(b))
    got = []
    for cut in (len(b) - 10, 20, 12):
        with pytest.raises(DecodeError) as info:
            h.decode_wal_entry(b[:cut], semantic_dims=3, tail_layout=0)
        got.append((info.value.path, info.value.offset))
    assert got == [("wal_entry.body.tail.dims", 24), ("wal_entry.body.meta", 18),
                   ("wal_entry.body.data.length", 9)]


def test_unseeded_checksums_bind_the_c_callable():
    assert h._ck_crc32 is zlib.crc32
    assert registry.checksum_func("crc32", fast=True) is zlib.crc32
    # a truncated store keeps the masking wrapper; the fast form equals the full one
    t = registry.checksum_func("crc32", 16, fast=True)
    assert t is not zlib.crc32 and t(b"123456789") == 0xCBF43926 & 0xFFFF
    for name in ("crc32", "xxh3_64", "crc32c", "blake3"):
        data = memoryview(bytearray(b"123456789"))[1:]
        assert registry.checksum_func(name, fast=True)(data) == \
            registry.checksum_func(name)(data)
