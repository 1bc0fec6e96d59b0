"""The registry of checksums, codecs and numeric conversions, and the schema constructs
built on it, on both codec paths (fast; Construct interpreted and compiled), decode and
encode; plus the resource bounds of runtime/compression.py."""

from __future__ import annotations

import bz2
import json
import struct
import subprocess
import sys
import zlib
from fractions import Fraction
from pathlib import Path

import lz4.frame
import pytest

from bytewright.generator import pipeline
from bytewright.runtime import compression, registry
from bytewright.runtime.errors import (
    ChecksumError,
    ConstraintError,
    DecodeError,
    EncodeError,
    UnsupportedError,
)
from bytewright.runtime.registry import CodecFailure

ROOT = Path(__file__).resolve().parent.parent


def both_paths(m, record: str, data: bytes, **params):
    fast, end = getattr(m, f"decode_{record}")(data, **params)
    assert end == len(data)
    assert getattr(m, f"construct_decode_{record}")(data, **params) == fast
    assert getattr(m, f"construct_decode_{record}")(data, compiled=True, **params) == fast
    assert getattr(m, f"encode_{record}")(fast, **params) == data
    assert getattr(m, f"construct_encode_{record}")(fast, **params) == data
    return fast


def every_path_rejects(m, record: str, data: bytes, exc=DecodeError, **params):
    for compiled in (None, False, True):
        with pytest.raises(exc):
            if compiled is None:
                getattr(m, f"decode_{record}")(data, **params)
            else:
                getattr(m, f"construct_decode_{record}")(data, compiled=compiled, **params)


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


# -- the registry itself ----------------------------------------------------------------

def test_builtins_register_as_plugins():
    reg = registry.REGISTRY
    for spec in registry.BUILTIN_PLUGINS:
        assert spec in reg.plugins
    assert {"crc32", "crc32c", "xxh3_64", "blake3"} <= set(reg.checksums)
    assert {"zstd", "zlib", "deflate", "lz4"} <= set(reg.codecs)
    assert {"q64.64", "tq1.9", "zigzag"} <= set(reg.numerics)
    assert reg.checksum("crc32").bits == 32 and reg.checksum("crc32").seeded
    assert reg.checksum("blake3").digest and reg.checksum("blake3").bits == 256
    assert reg.codec("deflate").self_terminating
    # A fresh registry built the same way holds the same names: nothing is special-cased.
    fresh = registry.Registry()
    for spec in registry.BUILTIN_PLUGINS:
        fresh.load_plugin(spec)
    assert set(fresh.checksums) >= {"crc32", "blake3"} and set(fresh.codecs) >= {"zstd"}
    with pytest.raises(UnsupportedError):
        fresh.codec("brotli")
    with pytest.raises(ValueError, match="module:function"):
        fresh.load_plugin("no_colon_here")


def test_checksum_seeds_chain_like_concatenation():
    crc = registry.checksum_func("crc32")
    assert crc(b"world", crc(b"hello ")) == crc(b"hello world")
    c = registry.checksum_func("crc32c")
    assert c(b"56789", c(b"1234")) == c(b"123456789") == 0xE3069283
    assert registry.checksum_func("crc32", 16)(b"123456789") == 0xCBF43926 & 0xFFFF


def test_zigzag_and_fixed_point_conversions():
    zz = registry.numeric("zigzag")
    assert [zz.decode(r) for r in range(5)] == [0, -1, 1, -2, 2]
    assert all(zz.decode(zz.encode(v)) == v for v in range(-300, 300))
    q = registry.numeric("q64.64")
    assert q.decode(1 << 63) == Fraction(1, 2) and q.encode(Fraction(-3, 4)) == -(3 << 62)
    t = registry.numeric("tq1.9")
    assert t.decode(19683) == 1 and t.encode(Fraction(1, 3)) == 6561
    with pytest.raises(DecodeError):
        t.decode(29525)


# -- compression in the schema language --------------------------------------------------

ENUM_CODECS = """
bytewright: 1
family: packs
enums:
  packing: {type: u8, values: {ZSTD: 0, ZLIB: 1, LZ4: 2, RESERVED: 3}}
records:
  item:
    fields:
      - {name: key, type: str, length: u8, encoding: utf-8}
      - {name: n, type: u32}
  pack:
    fields:
      - {name: algorithm, type: packing}
      - {name: count, type: u16}
      - name: items
        type: item
        repeat: {count: count}
        compressed: {algorithm: algorithm, codecs: {ZSTD: zstd, ZLIB: zlib, LZ4: lz4}, length: u32}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: preceding}}
"""


def pack_bytes(alg: int, items: list[tuple[str, int]]) -> bytes:
    plain = b"".join(bytes([len(k)]) + k.encode() + struct.pack("<I", n) for k, n in items)
    frame = compression.compress(["zstd", "zlib", "lz4"][alg], plain)
    head = struct.pack("<BH", alg, len(items))
    # The checksum covers the plain (decompressed) bytes of a compressed field.
    crc = zlib.crc32(head + plain)
    return head + struct.pack("<I", len(frame)) + frame + struct.pack("<I", crc)


@pytest.mark.parametrize("alg", [0, 1, 2])
def test_enum_mapped_codecs_without_member_names(schema_module, alg):
    m = schema_module(ENUM_CODECS)
    items = [("alpha", 1), ("beta", 2), ("gamma" * 20, 3)]
    data = pack_bytes(alg, items)
    value = both_paths(m, "pack", data)
    assert [(i.key, i.n) for i in value.items] == items
    rebuilt = m.Pack(m.Packing(alg), value.items)
    assert m.encode_pack(rebuilt) == data == m.construct_encode_pack(rebuilt)


def test_unmapped_algorithm_value_is_unsupported(schema_module):
    m = schema_module(ENUM_CODECS)
    data = bytearray(pack_bytes(0, [("a", 1)]))
    data[0] = 3  # RESERVED: a valid enum member with no codec
    every_path_rejects(m, "pack", bytes(data), UnsupportedError)
    with pytest.raises(EncodeError, match="no codec"):
        m.encode_pack(m.Pack(m.Packing.RESERVED, []))


RAW_DEFLATE = """
bytewright: 1
family: rawdef
records:
  entry:
    fields:
      - {name: v, type: u32}
  doc:
    fields:
      - {name: count, type: u8}
      - name: entries
        type: entry
        repeat: {count: count}
        compressed: {algorithm: deflate}
      - {name: trailer, type: u16}
"""


def test_raw_deflate_region_without_length(schema_module):
    m = schema_module(RAW_DEFLATE)
    plain = b"".join(struct.pack("<I", i * 1000) for i in range(50))
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    stream = co.compress(plain) + co.flush()
    data = bytes([50]) + stream + struct.pack("<H", 0xBEEF)
    value = both_paths(m, "doc", data)
    assert [e.v for e in value.entries] == [i * 1000 for i in range(50)]
    assert value.trailer == 0xBEEF  # the region's end was found by inflating it
    assert "_decompress_prefix(" in Path(m.__file__).read_text()
    every_path_rejects(m, "doc", data[:len(stream) // 2], DecodeError)


def test_region_without_length_needs_a_self_terminating_codec(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bw_bz2_codec.py").write_text(BZ2_PLUGIN)
    text = RAW_DEFLATE.replace("compressed: {algorithm: deflate}",
                               "compressed: {algorithm: bz2x}").replace(
        "family: rawdef", 'family: rawdef\nplugins: ["bw_bz2_codec:register"]')
    assert any("not self-terminating" in p for p in problems(tmp_path, text))
    text = RAW_DEFLATE.replace("algorithm: deflate", "algorithm: \"'brotlix'\", length: u32")
    assert any("unknown compression codec 'brotlix'" in p for p in problems(tmp_path, text))
    text = RAW_DEFLATE.replace("algorithm: deflate", "algorithm: brotlix, length: u32")
    assert any("unknown name 'brotlix'" in p for p in problems(tmp_path, text))


BZ2_PLUGIN = '''
import bz2

from bytewright.runtime.registry import CodecFailure


def decompress(data, limit):
    d = bz2.BZ2Decompressor()
    out = d.decompress(data, max_length=limit + 1)
    if len(out) > limit:
        raise CodecFailure("over the limit")
    if not d.eof:
        raise CodecFailure("bz2 stream is incomplete", truncated=True)
    if d.unused_data:
        raise CodecFailure("trailing bytes")
    return out


def register(reg):
    reg.add_codec("bz2x", compress=lambda b: bz2.compress(b, 9), decompress=decompress)
'''


def test_user_codec_plugin(schema_module, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bw_bz2_codec.py").write_text(BZ2_PLUGIN)
    m = schema_module("""
bytewright: 1
family: bzdoc
plugins: ["bw_bz2_codec:register"]
records:
  doc:
    fields:
      - {name: body, type: bytes, size: eos, compressed: {algorithm: bz2x, length: u16,
                                                            limit: 4096}}
""")
    body = b"bz2 through a user's plug-in " * 20
    frame = bz2.compress(body, 9)
    data = struct.pack("<H", len(frame)) + frame
    assert both_paths(m, "doc", data).body == body
    every_path_rejects(m, "doc", data[:-3], DecodeError)
    big = bz2.compress(bytes(5000), 9)
    every_path_rejects(m, "doc", struct.pack("<H", len(big)) + big, DecodeError)


# -- numeric conversions in the schema language ------------------------------------------

CONVERT = """
bytewright: 1
family: conv
types:
  sint32: {base: u32, convert: zigzag}
  fixed: {base: i128, fixed_point: q64.64}
records:
  rec:
    fields:
      - {name: delta, type: uleb128, convert: zigzag}
      - {name: offset, type: sint32}
      - {name: ratio, type: i128, convert: q64.64}
      - {name: raw, type: fixed}
      - {name: count, type: u8}
      - {name: tags, type: u8, repeat: {count: count}}
"""


def test_convert_on_decode_and_encode(schema_module):
    m = schema_module(CONVERT)
    data = (bytes([0x83, 0x01])  # uleb128 131 -> zigzag -66
            + struct.pack("<I", 7)  # zigzag 7 -> -4
            + ((3 << 62) | 0).to_bytes(16, "little", signed=True)  # 0.75
            + (1 << 64).to_bytes(16, "little", signed=True)  # raw kept: fixed_point
            + bytes([2, 9, 8]))
    value = both_paths(m, "rec", data)
    assert value.delta == -66 and value.offset == -4
    assert value.ratio == Fraction(3, 4) and value.raw == 1 << 64
    assert value.tags == [9, 8]
    out = m.encode_rec(m.Rec(delta=5, offset=-1, ratio=Fraction(-1, 8), raw=0, tags=[]))
    assert out[:1] == bytes([10]) and struct.unpack_from("<I", out, 1)[0] == 1
    assert m.decode_rec(out)[0].ratio == Fraction(-1, 8)
    assert m.construct_encode_rec(m.decode_rec(out)[0]) == out
    with pytest.raises(EncodeError):
        m.encode_rec(m.Rec(delta="x", offset=0, ratio=0, raw=0, tags=[]))


def test_convert_validation(tmp_path):
    bad = CONVERT.replace("convert: zigzag}", "convert: nosuch}", 1)
    assert any("unknown numeric kind 'nosuch'" in p for p in problems(tmp_path, bad))
    bad = CONVERT.replace("{base: u32, convert: zigzag}", "{base: i32, convert: zigzag}")
    assert any("zigzag needs an unsigned integer" in p for p in problems(tmp_path, bad))
    bad = CONVERT.replace("fixed_point: q64.64", "fixed_point: q99")
    assert any("unknown numeric kind 'q99'" in p for p in problems(tmp_path, bad))


def test_fixed_point_accepts_a_plugin_kind(tmp_path, monkeypatch, schema_module):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bw_q16.py").write_text(
        "from fractions import Fraction\n"
        "def register(reg):\n"
        "    reg.add_numeric('q16.16', decode=lambda r: Fraction(r, 1 << 16),\n"
        "                    encode=lambda v: int(Fraction(v) * (1 << 16)), signed=True,\n"
        "                    raw_model=True)\n")
    m = schema_module("""
bytewright: 1
family: q16
plugins: ["bw_q16:register"]
types:
  q16_16: {base: i32, fixed_point: q16.16}
records:
  pt:
    fields:
      - {name: x, type: q16_16}
      - {name: y, type: i32, convert: q16.16}
""")
    data = struct.pack("<ii", 3 << 16, -(1 << 15))
    value = both_paths(m, "pt", data)
    assert value.x == 3 << 16 and value.y == Fraction(-1, 2)


# -- shipped schemas: no format rule in shared code --------------------------------------

def test_shared_code_names_no_format():
    import re

    pat = re.compile(r"\b(htt|HTT|kladde|Kladde|pile|Pile|ZE|ze|ZEPEMBED)\b")
    hits = [f"{p.name}:{i}" for folder in ("generator", "runtime") for p in
            sorted((ROOT / folder).glob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if pat.search(line)]
    assert hits == []


def test_htt_codecs_live_in_the_htt_plugin():
    text = (ROOT / "schemas" / "htt.yaml").read_text()
    assert "bytewright.runtime.htt.codecs:register" in text
    src = (ROOT / "runtime" / "compression.py").read_text()
    assert "unpack_from(\"<I\"" not in src and "MAX_WBITS if" not in src
    registry.load_plugin("bytewright.runtime.htt.codecs:register")
    assert {"htt_zlib", "htt_lz4"} <= set(registry.REGISTRY.codecs)


# -- resource bounds ----------------------------------------------------------

def fixture_bytes(name: str) -> bytes:
    lines = (ROOT / "fixtures" / "htt" / name).read_text().splitlines()
    return bytes.fromhex("".join(x.split("#", 1)[0] for x in lines if not x.startswith("#")))


# Peak memory of one decode in a fresh process: resident (getrusage), virtual (VmPeak:
# a reserved-but-untouched buffer shows only here) and Python allocations (tracemalloc).
PEAK = """
import json, resource, sys, time, tracemalloc
from bytewright.generated import htt
from bytewright.runtime.errors import DecodeError
def vmpeak():
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmPeak"))
data = bytes.fromhex(sys.argv[1])
before, vm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, vmpeak()
tracemalloc.start()
t0 = time.perf_counter()
try:
    htt.decode_htt_file(data)
    outcome = "ok"
except DecodeError as exc:
    outcome = type(exc).__name__ + ": " + str(exc)
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - t0,
                  "grew_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
                  "vm_grew_kib": vmpeak() - vm,
                  "traced_peak": tracemalloc.get_traced_memory()[1]}))
"""


def peak(data: bytes) -> dict:
    out = subprocess.run([sys.executable, "-c", PEAK, data.hex()], capture_output=True,
                         text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def test_lz4_fixture_with_huge_declared_snapshot_fails_fast_and_small():
    data = bytearray(fixture_bytes("lz4_compressed.hex"))
    assert struct.unpack_from("<I", data, 32)[0] == 0x7A1  # snap_byte_len
    struct.pack_into("<I", data, 32, 0xFFFFFFF0)
    res = peak(bytes(data))
    assert res["outcome"].startswith("ConstraintError") and "limit" in res["outcome"]
    assert res["seconds"] < 1.0
    # was 4 GiB reserved up front (lz4 max_length=limit+1)
    assert res["grew_kib"] < 32 * 1024 and res["vm_grew_kib"] < 32 * 1024
    assert res["traced_peak"] < 4 << 20


def test_lz4_snapshot_declared_1gib_streams_in_small_steps():
    data = bytearray(fixture_bytes("lz4_compressed.hex"))
    struct.pack_into("<I", data, 32, 1 << 30)  # accepted as a cap: the codec streams
    res = peak(bytes(data))
    assert "wrong length" in res["outcome"]
    assert res["vm_grew_kib"] < 32 * 1024 and res["traced_peak"] < 4 << 20


def test_lz4_wal_block_does_not_reserve_its_cap():
    res = peak(fixture_bytes("lz4_compressed.hex"))
    assert res["outcome"] == "ok"
    # was 64 MiB reserved per WAL block (the default block limit)
    assert res["grew_kib"] < 32 * 1024 and res["vm_grew_kib"] < 32 * 1024
    assert res["traced_peak"] < 4 << 20


def test_lz4_frame_content_size_checked_before_decoding():
    frame = lz4.frame.compress(bytes(100_000))
    with pytest.raises(DecodeError, match="declares 100000 bytes"):
        compression.decompress("lz4", frame, 1000)
    assert compression.decompress("lz4", frame, 100_000) == bytes(100_000)


def test_lz4_block_size_over_int_max_is_a_decode_error():
    registry.load_plugin("bytewright.runtime.htt.codecs:register")
    block = struct.pack("<I", 0xFFFFFFF0) + b"\x10\x00"
    with pytest.raises(DecodeError, match="lz4"):
        compression.decompress("htt_lz4", block, 0xFFFFFFFF)
    # a plausible-looking size still cannot exceed what the block's bytes can expand to
    with pytest.raises(DecodeError, match="can hold"):
        compression.decompress("htt_lz4", struct.pack("<I", 10_000_000) + b"\x10\x00",
                               1 << 30)


def test_zip_bomb_refused(monkeypatch):
    import zstandard

    monkeypatch.setattr(compression, "BOMB_FLOOR", 1 << 20)
    bomb = zstandard.ZstdCompressor().compress(bytes(50 << 20))  # ~2 KB -> 50 MiB
    with pytest.raises(DecodeError, match="bomb"):
        compression.decompress("zstd", bomb, 1 << 30)
    monkeypatch.setattr(compression, "MAX_RATIO", 500)
    bomb = zlib.compress(bytes(50 << 20), 9)  # ~50 KB that inflates to 50 MiB (1000:1)
    with pytest.raises(DecodeError, match="bomb"):
        compression.decompress("zlib", bomb, 1 << 30)
    with pytest.raises(DecodeError, match="over the"):
        compression.decompress("zlib", bomb, (1 << 30) + 1, expected_size=(1 << 30) + 1)


def test_plugin_codec_exceptions_become_decode_errors():
    reg = registry.REGISTRY

    def broken(data: bytes, limit: int) -> bytes:
        raise KeyError("surprise")

    def lying(data: bytes, limit: int) -> bytes:
        return bytes(limit + 1)

    reg.add_codec("bw_test_broken", compress=bytes, decompress=broken)
    reg.add_codec("bw_test_lying", compress=bytes, decompress=lying)
    with pytest.raises(DecodeError, match="KeyError"):
        compression.decompress("bw_test_broken", b"x", 10, offset=5, path="a.b")
    with pytest.raises(DecodeError, match="limit"):
        compression.decompress("bw_test_lying", b"x", 10)
    with pytest.raises(DecodeError, match="truncated!"):
        def short(data: bytes, limit: int) -> bytes:
            raise CodecFailure("truncated!", truncated=True)
        reg.add_codec("bw_test_short", compress=bytes, decompress=short)
        compression.decompress("bw_test_short", b"x", 10)


def test_checksum_error_type_unchanged_for_shipped_crc(schema_module):
    # the registry path keeps ChecksumError/ConstraintError semantics of generated code
    m = schema_module("""
bytewright: 1
family: plaincrc
records:
  r:
    fields:
      - {name: a, type: u32}
      - {name: c, type: u32, checksum: {algorithm: crc32c, covers: preceding}}
""")
    from bytewright.runtime.checksums import crc32c

    data = struct.pack("<II", 5, crc32c(struct.pack("<I", 5)))
    both_paths(m, "r", data)
    every_path_rejects(m, "r", data[:4] + b"\x00\x00\x00\x00", (ChecksumError, ConstraintError))


def test_plugin_checksum_exceptions_become_decode_errors(schema_module):
    def even_only(data, seed=None):
        if len(data) % 2:
            raise ValueError("odd length")
        return sum(bytes(data)) & 0xFF

    registry.REGISTRY.add_checksum("bw_test_even", bits=8, func=even_only)
    with pytest.raises(ConstraintError, match="bw_test_even checksum failed: ValueError"):
        registry.checksum_func("bw_test_even")(b"abc")
    m = schema_module("""
bytewright: 1
family: evens
records:
  r:
    fields:
      - {name: body, type: bytes, length: u8}
      - {name: c, type: u8, checksum: {algorithm: bw_test_even, covers: [body]}}
""")
    good = bytes([3]) + b"abc"  # prefix + body: 4 bytes, even
    both_paths(m, "r", good + bytes([sum(good) & 0xFF]))
    every_path_rejects(m, "r", bytes([2]) + b"ab" + b"\x00", DecodeError)


def test_htt_raw_lz4_block_with_huge_size_is_a_decode_error():
    # a raw lz4 block declaring > 2**31-1 bytes raised OverflowError through
    # decode_htt_file; now every layer refuses it as a DecodeError, fast.
    from bytewright.generated import htt

    data = fixture_bytes("lz4_compressed.hex")
    (clen,) = struct.unpack_from("<I", data, 40)
    block = struct.pack("<I", 0xFFFFFFF0) + b"\x10\x00"
    for declared in (0xFFFFFFF0, 0x7A1):
        bad = bytearray(data[:44] + block + data[44 + clen:])
        struct.pack_into("<I", bad, 32, declared)
        struct.pack_into("<I", bad, 40, len(block))
        with pytest.raises(DecodeError, match="lz4"):
            htt.decode_htt_file(bytes(bad))
        with pytest.raises(DecodeError, match="lz4"):
            htt.construct_decode_htt_file(bytes(bad))
