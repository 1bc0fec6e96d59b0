"""Tests for the runtime support modules: checksums, compression, varint, fixedpoint,
hilbert."""

from __future__ import annotations

import dataclasses
import itertools
import math
import struct
import time
import zlib
from fractions import Fraction

import lz4.block
import lz4.frame
import pytest
import zstandard
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bytewright.runtime import checksums, compression, fixedpoint, hilbert, registry, varint
from bytewright.runtime.errors import (
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
    UnsupportedError,
)

# --- checksums ------------------------------------------------------------------------

CHECK = b"123456789"
BLAKE3_EMPTY = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"


def test_checksum_vectors() -> None:
    assert checksums.crc32(CHECK) == 0xCBF43926
    assert checksums.crc32c(CHECK) == 0xE3069283
    assert checksums.xxh3_64(b"") == 0x2D06800538D394C2
    assert checksums.blake3_256(b"").hex() == BLAKE3_EMPTY


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_checksums_accept_any_buffer(wrap: type) -> None:
    assert checksums.crc32(wrap(CHECK)) == 0xCBF43926
    assert checksums.crc32c(wrap(CHECK)) == 0xE3069283
    assert checksums.xxh3_64(wrap(b"")) == 0x2D06800538D394C2
    assert checksums.blake3_256(wrap(b"")).hex() == BLAKE3_EMPTY


def test_checksum_registry() -> None:
    assert set(checksums.ALGORITHMS) == {"crc32", "crc32c", "xxh3_64", "blake3_256"}
    for name, algo in checksums.ALGORITHMS.items():
        assert algo.name == name
        value = checksums.compute(name, CHECK)
        if algo.kind == "int":
            assert isinstance(value, int)
            assert 0 <= value < 1 << (8 * algo.size)
        else:
            assert isinstance(value, bytes) and len(value) == algo.size
    assert checksums.compute("crc32c", CHECK) == 0xE3069283
    with pytest.raises(dataclasses.FrozenInstanceError):
        checksums.ALGORITHMS["crc32"].size = 8  # type: ignore[misc]
    with pytest.raises(UnsupportedError):
        checksums.compute("md5", CHECK)


# --- compression ----------------------------------------------------------------------

SAMPLE = b"bytewright " * 500 + bytes(range(256))


@pytest.mark.parametrize("name", compression.ALGORITHMS)
@pytest.mark.parametrize("data", [b"", b"x", SAMPLE])
def test_round_trip(name: str, data: bytes) -> None:
    packed = compression.compress(name, data)
    assert compression.decompress(name, packed, len(data)) == data
    assert compression.decompress(name, memoryview(packed), len(data) + 10) == data
    assert compression.decompress(name, packed, 10**6, expected_size=len(data)) == data


def test_compress_formats() -> None:
    assert compression.compress("zstd", SAMPLE).startswith(compression.ZSTD_MAGIC)
    params = zstandard.get_frame_parameters(compression.compress("zstd", SAMPLE))
    assert params.content_size == len(SAMPLE)
    assert zlib.decompress(compression.compress("zlib", SAMPLE)) == SAMPLE
    assert lz4.frame.decompress(compression.compress("lz4", SAMPLE)) == SAMPLE
    with pytest.raises(EncodeError):
        compression.compress("brotli", SAMPLE)


def test_zlib_raw_and_wrapped() -> None:
    # Sniffing zlib vs raw deflate is HTT's rule: its plug-in codec htt_zlib does it;
    # the generic zlib/deflate codecs each accept exactly one stream format.
    registry.load_plugin("bytewright.runtime.htt.codecs:register")
    wrapped = zlib.compress(SAMPLE, 6)
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = co.compress(SAMPLE) + co.flush()
    assert compression.decompress("htt_zlib", wrapped, len(SAMPLE)) == SAMPLE
    assert compression.decompress("htt_zlib", raw, len(SAMPLE)) == SAMPLE
    assert compression.decompress("zlib", wrapped, len(SAMPLE)) == SAMPLE
    assert compression.decompress("deflate", raw, len(SAMPLE)) == SAMPLE
    with pytest.raises(DecodeError, match="zlib"):
        compression.decompress("zlib", raw, len(SAMPLE))
    # Same payload under a broken zlib adler32 must fail, not silently pass.
    bad = wrapped[:-1] + bytes([wrapped[-1] ^ 1])
    with pytest.raises(DecodeError, match="zlib"):
        compression.decompress("htt_zlib", bad, len(SAMPLE))


def test_lz4_frame_and_block() -> None:
    # The 4-byte size-prefixed raw block is HTT's variant (plug-in codec htt_lz4).
    registry.load_plugin("bytewright.runtime.htt.codecs:register")
    frame = lz4.frame.compress(SAMPLE)
    block = lz4.block.compress(SAMPLE, store_size=True)  # 4-byte LE size prefix
    assert block[:4] == struct.pack("<I", len(SAMPLE))
    assert compression.decompress("lz4", frame, len(SAMPLE)) == SAMPLE
    assert compression.decompress("htt_lz4", frame, len(SAMPLE)) == SAMPLE
    assert compression.decompress("htt_lz4", block, len(SAMPLE)) == SAMPLE
    with pytest.raises(DecodeError, match="magic"):
        compression.decompress("lz4", block, len(SAMPLE))
    # Block size is checked against the cap before decompressing.
    with pytest.raises(DecodeError, match="limit"):
        compression.decompress("htt_lz4", block, len(SAMPLE) - 1)
    # A prefix that over-states the size is caught.
    lying = struct.pack("<I", len(SAMPLE) + 5) + block[4:]
    with pytest.raises(DecodeError):
        compression.decompress("htt_lz4", lying, 10**6)
    with pytest.raises(DecodeError):
        compression.decompress("htt_lz4", b"\x01\x02", 100)


def test_zstd_cap_on_bomb_is_fast() -> None:
    bomb = zstandard.ZstdCompressor(level=3).compress(bytes(10_000_000))
    assert len(bomb) < 2000
    start = time.perf_counter()
    with pytest.raises(DecodeError, match="zstd.*limit"):
        compression.decompress("zstd", bomb, 1000, offset=40, path="blob.body")
    assert time.perf_counter() - start < 0.5


def test_zstd_cap_ignores_content_size_field() -> None:
    # A frame without content size is still capped by streaming decode.
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = cobj.compress(bytes(1_000_000)) + cobj.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    with pytest.raises(DecodeError):
        compression.decompress("zstd", frame, 999_999)
    assert compression.decompress("zstd", frame, 1_000_000) == bytes(1_000_000)


@pytest.mark.parametrize("name", compression.ALGORITHMS)
def test_caps_all_algorithms(name: str) -> None:
    packed = compression.compress(name, bytes(100_000))
    with pytest.raises(DecodeError):
        compression.decompress(name, packed, 99_999)
    assert compression.decompress(name, packed, 100_000) == bytes(100_000)


@pytest.mark.parametrize("name", compression.ALGORITHMS)
def test_truncated_corrupt_trailing(name: str) -> None:
    packed = compression.compress(name, SAMPLE)
    for cut in (1, 5, len(packed) // 2, len(packed) - 1):
        with pytest.raises(DecodeError):
            compression.decompress(name, packed[:cut], 10**6)
    with pytest.raises(DecodeError, match="trailing"):
        compression.decompress(name, packed + b"\x00", 10**6)
    flipped = bytearray(packed)
    flipped[len(flipped) // 2] ^= 0xFF
    try:
        out = compression.decompress(name, bytes(flipped), 10**6)
    except DecodeError:
        pass
    else:  # if a flip decodes at all it must not pretend to be the original
        assert out != SAMPLE


def test_truncated_is_truncated_error_and_carries_context() -> None:
    packed = compression.compress("zstd", SAMPLE)
    with pytest.raises(TruncatedError) as info:
        compression.decompress("zstd", packed[:-3], 10**6, offset=123, path="rec.payload")
    assert info.value.offset == 123
    assert info.value.path == "rec.payload"
    assert "zstd" in str(info.value)


def test_expected_size() -> None:
    packed = compression.compress("zlib", SAMPLE)
    assert compression.decompress("zlib", packed, 10**6, expected_size=len(SAMPLE)) == SAMPLE
    for wrong in (len(SAMPLE) - 1, len(SAMPLE) + 1):
        with pytest.raises(DecodeError):
            compression.decompress("zlib", packed, 10**6, expected_size=wrong)


def test_unknown_algorithm() -> None:
    with pytest.raises(UnsupportedError) as info:
        compression.decompress("brotli", b"", 10, offset=7, path="x")
    assert info.value.offset == 7 and info.value.path == "x"


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(compression.ALGORITHMS),
    st.one_of(
        st.binary(max_size=200),
        st.binary(max_size=60).map(lambda b: compression.ZSTD_MAGIC + b),
        st.binary(max_size=60).map(lambda b: compression.LZ4_FRAME_MAGIC + b),
        st.binary(max_size=60).map(lambda b: b"\x78\x9c" + b),
    ),
)
def test_random_bytes_only_raise_decode_error(name: str, data: bytes) -> None:
    try:
        out = compression.decompress(name, data, 4096)
    except DecodeError:
        return
    assert len(out) <= 4096


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(compression.ALGORITHMS), st.binary(max_size=2000), st.data())
def test_mutated_frames_only_raise_decode_error(name: str, payload: bytes, data) -> None:
    packed = bytearray(compression.compress(name, payload))
    pos = data.draw(st.integers(0, len(packed) - 1))
    packed[pos] = data.draw(st.integers(0, 255))
    try:
        compression.decompress(name, bytes(packed), 4096)
    except DecodeError:
        pass


# --- varint ---------------------------------------------------------------------------

VECTORS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),  # the largest two-byte value (encoded without the loop)
    (16384, "808001"),
    (2**64 - 1, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "hexed"), VECTORS)
def test_uleb128_vectors(value: int, hexed: str) -> None:
    raw = bytes.fromhex(hexed)
    assert varint.encode_uleb128(value) == raw
    assert varint.uleb128_size(value) == len(raw)
    assert varint.decode_uleb128(raw, minimal=True) == (value, len(raw))
    assert varint.decode_uleb128(b"\xaa" + raw + b"\xff", 1) == (value, len(raw) + 1)


def test_uleb128_errors() -> None:
    with pytest.raises(TruncatedError) as info:
        varint.decode_uleb128(b"\x00\x80\x80", 1)
    assert info.value.offset == 1
    with pytest.raises(TruncatedError):
        varint.decode_uleb128(b"", 0)
    with pytest.raises(ConstraintError):
        varint.decode_uleb128(b"\x80\x80\x01", max_bytes=2)
    with pytest.raises(ConstraintError):
        varint.decode_uleb128(b"\x80" * 10 + b"\x01")  # 11 bytes
    with pytest.raises(ConstraintError):
        varint.decode_uleb128(bytes.fromhex("ffffffffffffffffff02"))  # 2**64
    # Non-minimal: accepted by default, rejected with minimal=True.
    assert varint.decode_uleb128(b"\x80\x00") == (0, 2)
    assert varint.decode_uleb128(b"\x81\x80\x00") == (1, 3)
    with pytest.raises(ConstraintError, match="non-minimal"):
        varint.decode_uleb128(b"\x80\x00", minimal=True, path="hdr.len")
    for bad in (-1, -200, 2**64, True, False, 1.0):
        with pytest.raises(EncodeError):
            varint.encode_uleb128(bad)  # type: ignore[arg-type]
    # an int subclass other than bool (an IntEnum member) encodes as its value
    import enum

    class Tag(enum.IntEnum):
        SMALL = 5
        BIG = 300

    assert varint.encode_uleb128(Tag.SMALL) == b"\x05"
    assert varint.encode_uleb128(Tag.BIG) == bytes.fromhex("ac02")


@given(st.integers(0, 2**64 - 1))
def test_uleb128_round_trip(value: int) -> None:
    raw = varint.encode_uleb128(value)
    assert len(raw) == varint.uleb128_size(value)
    assert varint.decode_uleb128(memoryview(raw), minimal=True) == (value, len(raw))


@given(st.binary(max_size=16))
def test_uleb128_random_only_decode_error(data: bytes) -> None:
    try:
        value, end = varint.decode_uleb128(data, minimal=True)
    except DecodeError:
        return
    assert varint.encode_uleb128(value) == data[:end]


# --- fixedpoint -----------------------------------------------------------------------

Q = fixedpoint.Q64_ONE


def test_q64_from_float() -> None:
    assert fixedpoint.q64_from_float(1.0) == Q
    assert fixedpoint.q64_from_float(-2.5) == -5 * Q // 2
    assert fixedpoint.q64_from_float(0.1) == int(Fraction(0.1) * Q)
    # Truncation toward zero, both signs: 2**-70 is below one ulp of Q64.64.
    assert fixedpoint.q64_from_float(2.0**-70) == 0
    assert fixedpoint.q64_from_float(-(2.0**-70)) == 0
    assert fixedpoint.q64_from_float(-(2.0**-64) * 1.5) == -1
    assert fixedpoint.q64_from_float(-(2.0**63)) == fixedpoint.I128_MIN
    for bad in (math.nan, math.inf, -math.inf, 2.0**63, -(2.0**64)):
        with pytest.raises(EncodeError):
            fixedpoint.q64_from_float(bad)


def test_q64_conversions() -> None:
    assert fixedpoint.q64_to_float(Q // 4) == 0.25
    assert fixedpoint.q64_to_fraction(-3 * Q // 8) == Fraction(-3, 8)
    assert fixedpoint.q64_from_fraction(Fraction(-1, 3)) == -(Q // 3)  # toward zero
    assert fixedpoint.q64_from_fraction(Fraction(1, 3)) == Q // 3
    assert fixedpoint.I128_MAX == 2**127 - 1 and fixedpoint.I128_MIN == -(2**127)
    with pytest.raises(EncodeError):
        fixedpoint.q64_from_fraction(Fraction(2**63))
    with pytest.raises(ConstraintError):
        fixedpoint.q64_to_float(2**127)


def test_round_half_away() -> None:
    ra = fixedpoint.round_half_away
    assert [ra(n, 2) for n in (-3, -1, 1, 3)] == [-2, -1, 1, 2]
    assert [ra(n, 4) for n in (-5, -6, 5, 6, 7)] == [-1, -2, 1, 2, 2]
    assert ra(0, 7) == 0
    with pytest.raises(ValueError):
        ra(1, 0)


def test_tq19_round_trip_exhaustive() -> None:
    for q in range(-fixedpoint.TQ19_MAX, fixedpoint.TQ19_MAX + 1):
        raw = fixedpoint.tq19_to_q64(q)
        assert fixedpoint.tq19_from_q64(raw) == q
    assert fixedpoint.TQ19_SCALE == 19683


def test_tq19_rounding_halves() -> None:
    scale = fixedpoint.TQ19_SCALE
    # Half a TQ1.9 step is not an integral raw value: check the raws either side of it.
    half = Fraction(1, 2 * scale)
    raw_half = half * Q
    assert raw_half.denominator != 1  # no exact tie in Q64.64; check both sides of it
    below, above = math.floor(raw_half), math.ceil(raw_half)
    assert fixedpoint.tq19_from_q64(below) == 0
    assert fixedpoint.tq19_from_q64(above) == 1
    assert fixedpoint.tq19_from_q64(-below) == 0
    assert fixedpoint.tq19_from_q64(-above) == -1
    # Exact ties exist: raw = 2**63 (value 1/2) is 9841.5 steps.
    assert fixedpoint.tq19_from_q64(2**63) == 9842  # 9841.5 -> away from zero
    assert fixedpoint.tq19_from_q64(-(2**63)) == -9842
    assert fixedpoint.tq19_from_q64(Q) == scale
    # to_q64 direction: q * 2**64 / scale rounds half away (no exact ties, so nearest).
    assert fixedpoint.tq19_to_q64(1) == round(Fraction(Q, scale))
    assert fixedpoint.tq19_to_q64(-1) == -fixedpoint.tq19_to_q64(1)


def test_tq19_range() -> None:
    top = fixedpoint.TQ19_MAX
    assert fixedpoint.tq19_from_q64(fixedpoint.tq19_to_q64(top)) == top
    over = fixedpoint.tq19_to_q64(top) + Q // fixedpoint.TQ19_SCALE  # rounds to top + 1
    with pytest.raises(EncodeError):
        fixedpoint.tq19_from_q64(over)
    with pytest.raises(EncodeError):
        fixedpoint.tq19_from_q64(-over)
    with pytest.raises(EncodeError):
        fixedpoint.tq19_from_q64(fixedpoint.q64_from_float(1.6))  # 31492 > 29524
    for q in (top + 1, -top - 1, 2**15):
        with pytest.raises(ConstraintError):
            fixedpoint.tq19_to_q64(q)


def test_tq19_canonical() -> None:
    raw = fixedpoint.q64_from_float(0.123456789)
    canon = fixedpoint.tq19_canonical(raw)
    assert abs(Fraction(canon - raw, Q)) <= Fraction(1, 2 * fixedpoint.TQ19_SCALE)
    assert fixedpoint.tq19_canonical(canon) == canon


# Smallest raw whose value is above TQ19_MAX + 1/2 step (the tie itself is not integral).
_TQ_EDGE = -(-(2 * fixedpoint.TQ19_MAX + 1) * Q // (2 * fixedpoint.TQ19_SCALE))


@given(st.integers(-2 * _TQ_EDGE, 2 * _TQ_EDGE))
@example(_TQ_EDGE)
@example(_TQ_EDGE - 1)
@example(-_TQ_EDGE)
@example(1 - _TQ_EDGE)
def test_tq19_from_q64_is_nearest_or_rejected(raw: int) -> None:
    exact = Fraction(raw * fixedpoint.TQ19_SCALE, Q)
    if abs(raw) >= _TQ_EDGE:  # rounds to beyond +-29524: must be rejected, not saturated
        with pytest.raises(EncodeError):
            fixedpoint.tq19_from_q64(raw)
        return
    q = fixedpoint.tq19_from_q64(raw)
    assert abs(exact - q) <= Fraction(1, 2)


# --- hilbert --------------------------------------------------------------------------


def _walk(n: int, bits: int) -> list[list[int]]:
    return [hilbert.hilbert_coords(i, n, bits) for i in range(1 << (n * bits))]


@pytest.mark.parametrize(("n", "bits"), [(2, 4), (3, 3), (1, 5), (4, 2)])
def test_hilbert_bijection_and_adjacency(n: int, bits: int) -> None:
    points = _walk(n, bits)
    assert len({tuple(p) for p in points}) == 1 << (n * bits)
    for i, p in enumerate(points):
        assert all(0 <= c < 1 << bits for c in p)
        assert hilbert.hilbert_index(p, bits) == i
    for a, b in itertools.pairwise(points):
        assert sum(abs(x - y) for x, y in zip(a, b, strict=False)) == 1


def test_hilbert_known_values() -> None:
    # Classic 2x2 curve per Skilling's transpose: (0,0) (0,1) (1,1) (1,0).
    assert [hilbert.hilbert_coords(i, 2, 1) for i in range(4)] == [[0, 0], [0, 1], [1, 1], [1, 0]]
    assert hilbert.hilbert_index([0, 0, 0], 5) == 0
    # Interleave check: axis 0 is the most significant bit of each bit-plane.
    assert hilbert.hilbert_index([1, 0], 1) == 0b11
    assert hilbert.hilbert_index([0, 1], 1) == 0b01


def test_hilbert_errors() -> None:
    with pytest.raises(ValueError):
        hilbert.hilbert_index([16, 0], 4)
    with pytest.raises(ValueError):
        hilbert.hilbert_index([-1], 4)
    with pytest.raises(ValueError):
        hilbert.hilbert_index([], 4)
    with pytest.raises(ValueError):
        hilbert.hilbert_coords(1 << 8, 2, 4)


@given(st.lists(st.integers(0, 2**21 - 1), min_size=1, max_size=8))
def test_hilbert_round_trip_wide(coords: list[int]) -> None:
    index = hilbert.hilbert_index(coords, 21)
    assert 0 <= index < 1 << (21 * len(coords))
    assert hilbert.hilbert_coords(index, len(coords), 21) == coords


def test_normalize_axis() -> None:
    na = hilbert.normalize_axis
    assert na(0.0, 0.0, 1.0, 8) == 0
    assert na(1.0, 0.0, 1.0, 8) == 255
    assert na(0.5, 0.0, 1.0, 1) == 1  # 0.5 rounds up
    assert na(0.49, 0.0, 1.0, 1) == 0
    assert na(-5.0, 0.0, 1.0, 8) == 0
    assert na(math.inf, 0.0, 1.0, 8) == 255
    assert na(50.0, -100.0, 100.0, 4) == 11  # 0.75 * 15 = 11.25
    for lo, hi in ((1.0, 1.0), (2.0, 1.0)):
        with pytest.raises(ValueError):
            na(0.5, lo, hi, 8)
    with pytest.raises(ValueError):
        na(math.nan, 0.0, 1.0, 8)
