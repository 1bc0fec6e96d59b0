"""HTT codecs: goldens from facts.md, every fixture through both paths, bad input."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bytewright.generated import htt as h
from bytewright.review import checks
from bytewright.runtime.errors import (
    ChecksumError,
    ConstraintError,
    DecodeError,
    TruncatedError,
    UnsupportedError,
)

EMPTY_V2 = bytes.fromhex(
    "485454000208041000000000000000000100000000000000000000006b5b486c"
    "00000000000000000000000000000000" "01000000")
STRUCTURAL_0_509 = bytes.fromhex(
    "485454000200040000000000000000000100000000000000070000001832c2bad2010000070000000600"
    "2f706c61696e0000000002000c005f6368696c645f696e6465780100300c00636f6e74656e745f7479"
    "706517006170706c69636174696f6e2f782d6469726563746f72790e002f706c61696e2f6e6f64655f"
    "3030090000007061796c6f61642d3002000c005f6368696c645f696e64657801003004006b696e640a"
    "007374727563747572616c0e002f706c61696e2f6e6f64655f3031090000007061796c6f61642d3102"
    "000c005f6368696c645f696e64657801003104006b696e640a007374727563747572616c0e002f706c"
    "61696e2f6e6f64655f3032090000007061796c6f61642d3202000c005f6368696c645f696e64657801"
    "003204006b696e640a007374727563747572616c0e002f706c61696e2f6e6f64655f30330900000070"
    "61796c6f61642d3302000c005f6368696c645f696e64657801003304006b696e640a00737472756374"
    "7572616c0e002f706c61696e2f6e6f64655f3034090000007061796c6f61642d3402000c005f636869"
    "6c645f696e64657801003404006b696e640a007374727563747572616c0e002f706c61696e2f6e6f64"
    "655f3035090000007061796c6f61642d3502000c005f6368696c645f696e64657801003504006b696e"
    "640a007374727563747572616c61ffdc48")

FIXTURES = checks.fixtures("htt")


def case(cases, name):
    return next(c for c in cases if c[0] == name)


def test_empty_v2_is_reproduced_from_field_values(htt_cases):
    _, record, params, value, _ = case(htt_cases, "01_empty")
    data = h.ENCODERS[record](value, **params)
    assert data == EMPTY_V2 and len(data) == 52
    header, _ = h.decode_file_header(data)
    assert int.from_bytes(data[28:32], "little") == 1816681323


def test_empty_v1_is_48_bytes(htt_cases):
    _, record, params, value, _ = case(htt_cases, "empty_v1")
    data = h.ENCODERS[record](value, **params)
    assert len(data) == 48
    assert data[4] == 1


def test_structural_only_is_reproduced(htt_cases):
    _, record, params, value, _ = case(htt_cases, "02_structural_only")
    data = h.ENCODERS[record](value, **params)
    assert len(data) == 518
    assert data[:510] == STRUCTURAL_0_509
    assert int.from_bytes(data[28:32], "little") == 3133288984
    assert data[506:510] == bytes.fromhex("61ffdc48")
    # snapshot CRC covers only the raw entry bytes (not snap_byte_len/snap_node_count)
    assert zlib.crc32(data[40:506]) == 0x48DCFF61


def test_stored_fixtures_match_their_cases(htt_cases):
    """Every fixture is reproducible from the field values in tests/cases/htt_cases.py."""
    stored = {fx.path.stem: fx for fx in FIXTURES}
    assert set(stored) == {c[0] for c in htt_cases}
    for name, record, params, value, _ in htt_cases:
        fx = stored[name]
        assert (fx.record, fx.params) == (record, params), name
        assert h.ENCODERS[record](value, **params) == fx.data, name


@pytest.mark.parametrize("fx", FIXTURES, ids=lambda f: f.path.stem)
def test_fixture_both_paths(fx):
    """Parse, build, size and compiled parity together (Construct's test helper shape)."""
    value, end = h.DECODERS[fx.record](fx.data, **fx.params)
    assert end == len(fx.data)
    assert h.ENCODERS[fx.record](value, **fx.params) == fx.data
    assert h.CONSTRUCT_DECODERS[fx.record](fx.data, **fx.params) == value
    assert h.CONSTRUCT_DECODERS[fx.record](fx.data, compiled=True, **fx.params) == value
    assert h.CONSTRUCT_ENCODERS[fx.record](value, **fx.params) == fx.data
    assert h.CONSTRUCT_ENCODERS[fx.record](value, compiled=True, **fx.params) == fx.data


def test_fixture_coverage():
    """Every op, every version, every tail layout and every algorithm is in a fixture."""
    ops, versions, tails, algs = set(), set(), set(), set()
    for fx in FIXTURES:
        if fx.record != "htt_file":
            continue
        f, _ = h.decode_htt_file(fx.data)
        versions.add(f.header.version)
        if f.header.flags.compressed:
            algs.add(f.header.flags.algorithm)
        entries = list(f.wal.entries or []) + [e for b in f.wal.blocks or [] for e in b.entries]
        ops |= {e.op for e in entries}
        for e in list(f.snapshot.entries) + [e.body for e in entries]:
            tail = getattr(e, "tail", None)
            if tail is not None:
                tails.add(type(tail).__name__)
    assert ops == set(h.WalOp)
    assert versions == {1, 2, 3, 4}
    assert tails == {"TailFull", "TailQuantized", "TailQuantizedGacl"}
    assert algs == {h.CompressionAlgorithm.zstd, h.CompressionAlgorithm.zlib,
                    h.CompressionAlgorithm.lz4}
    sidecars = {h.decode_sidecar_segment(fx.data)[0].version for fx in FIXTURES
                if fx.record == "sidecar_segment"}
    assert sidecars == {1, 2}


def test_header_crc_mismatch_names_expected_and_found():
    bad = bytearray(EMPTY_V2)
    bad[24] = 1  # node_count changes, CRC does not
    with pytest.raises(ChecksumError) as exc:
        h.decode_htt_file(bytes(bad))
    err = exc.value
    assert err.path == "htt_file.header.header_crc"
    assert err.offset == 28
    assert err.found == 1816681323 and err.expected == zlib.crc32(bytes(bad[:28]))
    assert "expected" in str(err) and "found" in str(err)


def test_snapshot_crc_mismatch():
    data = bytearray(checks.parse_fixture(checks.FIXTURE_DIR / "htt/02_structural_only.hex").data)
    data[100] ^= 0x01  # inside an entry payload
    with pytest.raises(DecodeError) as exc:
        h.decode_htt_file(bytes(data))
    assert exc.value.path.startswith("htt_file.snapshot")


def test_unknown_version_is_refused_with_offset():
    bad = bytearray(EMPTY_V2)
    bad[4] = 5
    bad[28:32] = struct.pack("<I", zlib.crc32(bytes(bad[:28])))
    with pytest.raises(ConstraintError) as exc:
        h.decode_htt_file(bytes(bad))
    assert exc.value.offset == 4 and exc.value.path == "htt_file.header.version"


def test_versioned_dispatch_refuses_unknown_version():
    with pytest.raises(UnsupportedError):
        h.decode_snapshot_section(bytes(12), version=9, compressed=False, algorithm=0,
                                  semantic_dims=0, tail_layout=0)


def test_bad_magic():
    bad = b"HTX\0" + EMPTY_V2[4:]
    with pytest.raises(ConstraintError) as exc:
        h.decode_file_header(bad)
    assert exc.value.offset == 0 and exc.value.path == "file_header.magic"


def test_unknown_op_names_path_and_offset():
    entry = checks.parse_fixture(checks.FIXTURE_DIR / "htt/wal_entry_delete_7.hex").data
    bad = bytearray(entry)
    bad[4] = 7
    with pytest.raises(ConstraintError) as exc:
        h.decode_wal_entry(bytes(bad), semantic_dims=16, tail_layout=0)
    assert exc.value.offset == 4 and exc.value.path == "wal_entry.op"


def test_oversized_count_fails_before_allocating():
    # meta_count = 65535 with nothing behind it
    body = struct.pack("<IBH", 1, 2, 1) + b"/" + struct.pack("<I", 0) + struct.pack("<H", 65535)
    with pytest.raises(TruncatedError) as exc:
        h.decode_wal_entry(body, semantic_dims=0, tail_layout=0)
    assert exc.value.path == "wal_entry.body.meta"


def test_nested_error_path_has_array_index():
    fx = checks.parse_fixture(checks.FIXTURE_DIR / "htt/02_structural_only.hex")
    data = bytearray(fx.data)
    # the 3rd entry's first meta key length: make it point past the end
    value, _ = h.decode_htt_file(bytes(data))
    off = 40 + sum(len(h.encode_snapshot_entry(e, semantic_dims=0, tail_layout=0))
                   for e in value.snapshot.entries[:2])
    off += 2 + len(value.snapshot.entries[2].key.encode()) + 4 + 9 + 2
    data[off:off + 2] = b"\xff\xff"
    with pytest.raises(DecodeError) as exc:
        h.decode_htt_file(bytes(data))
    assert exc.value.path.startswith("htt_file.snapshot.entries[2].meta[0].key")


def test_invalid_utf8_key():
    body = struct.pack("<IBH", 1, 3, 2) + b"\xff\xfe"
    body += struct.pack("<I", zlib.crc32(body))
    with pytest.raises(ConstraintError) as exc:
        h.decode_wal_entry(body, semantic_dims=0, tail_layout=0)
    assert exc.value.path == "wal_entry.key" and exc.value.offset == 7


ALL_DECODERS = [(fx.record, fx.params, fx.data) for fx in FIXTURES]


@pytest.mark.parametrize("record,params,data", ALL_DECODERS,
                         ids=[fx.path.stem for fx in FIXTURES])
def test_every_truncation_raises_project_error(record, params, data):
    for cut in range(len(data)):
        try:
            h.DECODERS[record](data[:cut], **params)
        except DecodeError as exc:
            assert exc.path.startswith(record)
            assert exc.offset is None or 0 <= exc.offset <= len(data) + 64
        else:
            # a prefix may itself be valid only where the layout ends "to end of section"
            assert record in ("htt_file", "sidecar_segment", "wal_section"), cut


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_bitflips_raise_only_project_errors(data):
    fx = data.draw(st.sampled_from(FIXTURES))
    buf = bytearray(fx.data)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= 1 << data.draw(st.integers(0, 7))
    try:
        h.DECODERS[fx.record](bytes(buf), **fx.params)
    except DecodeError as exc:
        assert exc.path.startswith(fx.record)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600), st.sampled_from(sorted(h.DECODERS)),
       st.integers(0, 40), st.integers(0, 2))
def test_random_bytes_raise_only_project_errors(blob, record, sem, layout):
    params = {"semantic_dims": sem, "tail_layout": layout, "version": 2, "compressed": True,
              "algorithm": 0, "block_compressed": True}
    import inspect
    wanted = inspect.signature(h.DECODERS[record]).parameters
    try:
        h.DECODERS[record](blob, **{k: v for k, v in params.items() if k in wanted})
    except DecodeError:
        pass


def test_construct_path_errors_are_project_errors():
    with pytest.raises(DecodeError):
        h.construct_decode_htt_file(EMPTY_V2[:20])
    with pytest.raises(DecodeError):
        h.construct_decode_htt_file(EMPTY_V2[:28] + b"\0\0\0\0" + EMPTY_V2[32:])


def test_zero_copy_input_types():
    v1, _ = h.decode_htt_file(EMPTY_V2)
    v2, _ = h.decode_htt_file(bytearray(EMPTY_V2))
    v3, _ = h.decode_htt_file(memoryview(EMPTY_V2))
    assert v1 == v2 == v3


def test_decode_at_offset():
    entry = checks.parse_fixture(checks.FIXTURE_DIR / "htt/wal_entry_epoch_6.hex").data
    v, end = h.decode_wal_entry(b"junk" + entry + entry, 4 + len(entry), semantic_dims=16,
                                tail_layout=0)
    assert end == 4 + 2 * len(entry) and v.body.epoch_id == 1


def test_layout_as_data():
    fields = {f["name"]: f for f in h.LAYOUT["file_header"]["layouts"][0]["fields"]}
    assert (fields["tau"]["offset"], fields["tau"]["size"]) == (8, 16)
    assert (fields["node_count"]["offset"], fields["header_crc"]["offset"]) == (24, 28)
    assert h.LAYOUT["file_header"]["layouts"][0]["fixed_size"] == 32
    snap = h.LAYOUT["snapshot_section"]["layouts"]
    assert [lay["versions"] for lay in snap] == [[1], [2, 3, 4]]
    assert [f["name"] for f in snap[1]["fields"]][-1] == "snapshot_crc"
