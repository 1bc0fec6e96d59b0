"""ZE: nothing is lost, and damage is diagnosed by the checksum that covers it.

- Any checksum-valid record after WAL damage (whatever its op, a future one included) makes
  the damage "in the middle": repair and the appender refuse without ``discard_after``, and
  info and replay agree (rules.txt WAL: records are framing plus a checksum; op ids are
  append-only, so a newer writer's additive op is still a record).
- Every cut goes through ``runtime.cut``: torn tails too leave a side file.
- The covering checksum is verified before the fields it covers are checked.
- Registered opaque region kinds are skipped by ``ze verify`` / ``ze dump`` (rules: unknown
  kinds are bounded and skipped).
- A manifest whose ranges are all Unstamped is written without TSR1 (rules: "When every
  segment range is Unstamped, writers append no range bytes").
- Version ranges come from the registry (rules: "readers accept only the registry's
  declared inclusive range"), and ``bytewright diff`` reports changes to them.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.generated import ze
from bytewright.review.checks import FIXTURE_DIR, parse_fixture
from bytewright.runtime import cut
from bytewright.runtime.checksums import xxh3_64
from bytewright.runtime.errors import ChecksumError, DecodeError
from bytewright.runtime.ze import artifacts, envelope, files, graph, graphwal, segment, wal

ROOT = Path(__file__).resolve().parent.parent


def fixture(name: str) -> bytes:
    return parse_fixture(FIXTURE_DIR / "ze" / f"{name}.hex").data


def _multi_flipped() -> bytes:
    """wal_multi_v1 with one bit flipped in record 2 (record 3 carries op 0xFFFF)."""
    d = bytearray(fixture("wal_multi_v1"))
    d[40 + 22 + 14] ^= 1
    return bytes(d)


REC3 = 40 + 22 + 25  # offset of record 3 in wal_multi_v1


def _future_op_wal() -> tuple[bytes, int, int]:
    """Three records, the last with op 12 (a future additive op), record 2 damaged."""
    data = bytearray(wal.wal_bytes(1, [(2, b"\x01\x02"), (2, b"\x03\x04\x05"),
                                       (12, b"future")]))
    r = wal.replay(bytes(data))
    second, third = r.records[1].offset, r.records[2].offset
    data[second + 15] ^= 0x20
    return bytes(data), second, third


# -- 1. any checksum-valid record after the damage counts ---------------------------------

@pytest.mark.parametrize("build", ["unknown_op", "future_op"])
def test_a_verifying_record_of_any_op_after_damage_is_valid_looking(build):
    if build == "unknown_op":
        data, bad, after = _multi_flipped(), 62, REC3
    else:
        data, bad, after = _future_op_wal()
    r = wal.replay(data)
    assert r.terminator == "corrupt" and r.offset == bad
    assert r.valid_after_offsets == [after]
    assert r.damaged and r.corruption == "middle"
    assert "torn tail" not in r.describe()
    assert "valid-looking records follow" in r.describe()


def test_repair_without_the_flag_refuses_and_changes_nothing(tmp_path, capsys):
    path = tmp_path / "multi.wal"
    data = _multi_flipped()
    path.write_bytes(data)
    assert main(["ze", "repair", str(path)]) == 1
    assert "offset 62" in capsys.readouterr().err
    assert path.read_bytes() == data and cut.side_files(path) == []
    # with the flag, every removed byte is kept
    assert main(["ze", "repair", "--discard-after", "62", str(path)]) == 0
    assert path.read_bytes() == data[:62]
    sides = cut.side_files(path)
    assert [Path(s).read_bytes() for s in sides] == [data[62:]]


def test_appender_refuses_a_future_op_after_damage(tmp_path):
    data, bad, _ = _future_op_wal()
    path = tmp_path / "f.wal"
    path.write_bytes(data)
    with pytest.raises(files.WalDamaged):
        files.WalAppender(path)
    assert path.read_bytes() == data and cut.side_files(path) == []


def test_info_and_replay_agree(tmp_path, capsys):
    path = tmp_path / "multi.wal"
    path.write_bytes(_multi_flipped())
    assert main(["ze", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "middle" in out and "torn tail" not in out
    assert "1 valid-looking records follow" in out


def test_a_zero_filled_tail_is_still_a_torn_tail():
    """Zero bytes after the last record (a crash after the file grew) hold no record."""
    data = wal.wal_bytes(1, [(2, b"\x01")]) + bytes(1 << 20)
    r = wal.replay(data)
    assert r.terminator == "corrupt" and r.scan_complete and not r.damaged
    assert "torn tail" in r.describe()


# -- 6. every cut keeps its bytes ---------------------------------------------------------

def test_no_ftruncate_left_in_the_ze_runtime():
    for p in (ROOT / "runtime" / "ze").glob("*.py"):
        assert "ftruncate" not in p.read_text(encoding="utf-8"), p.name
    assert not hasattr(files, "keep_discarded")


def test_appender_keeps_a_torn_tail_in_a_side_file(tmp_path):
    whole = wal.wal_bytes(1, [(2, b"\x01\x02"), (2, b"\x03")])
    path = tmp_path / "t.wal"
    path.write_bytes(whole[:-5])
    r = wal.replay(whole)
    torn_at = r.records[1].offset
    with files.WalAppender(path) as app:
        assert app.discarded == f"{path}.discarded-{torn_at}"
        app.append(2, b"\x09")
    assert Path(app.discarded).read_bytes() == whole[torn_at:-5]


def test_cli_repair_of_a_torn_tail_keeps_it(tmp_path, capsys):
    whole = wal.wal_bytes(1, [(2, b"\x01\x02"), (2, b"\x03")])
    path = tmp_path / "t.wal"
    path.write_bytes(whole[:-3])
    assert main(["ze", "repair", str(path)]) == 0
    assert "discarded-" in capsys.readouterr().out
    after = path.read_bytes()
    assert after + b"".join(Path(s).read_bytes() for s in cut.side_files(path)) == whole[:-3]


def test_discard_after_cut_goes_through_runtime_cut(tmp_path, monkeypatch):
    data = _multi_flipped()
    path = tmp_path / "m.wal"
    path.write_bytes(data)
    calls = []
    real = cut.cut

    def spy(*a, **k):
        calls.append(k.get("reason"))
        return real(*a, **k)

    monkeypatch.setattr(cut, "cut", spy)
    with files.WalAppender(path, discard_after=62):
        pass
    assert calls and path.read_bytes() == data[:62]


# -- 2. the covering checksum first -------------------------------------------------------

def _u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def _reseal_file(b: bytearray) -> bytes:
    b[-8:] = _u64(xxh3_64(bytes(b[:-8])))
    return bytes(b)


def _flip(data: bytes, at: int, mask: int = 1) -> bytearray:
    d = bytearray(data)
    d[at] ^= mask
    return d


def test_segment_header_flip_is_a_checksum_error():
    seg = segment.build_segment(bytes(16), 0, 4, 3, [(2, bytes(8))])
    for at, mask in ((56, 2),  # scheme 4 -> 6 (unknown) / retired 5 with mask 1
                     (56, 1), (54, 1), (64 + 4, 1), (64 + 8, 1)):
        with pytest.raises(ChecksumError):
            segment.open_segment(bytes(_flip(seg, at, mask)))


def test_manifest_payload_flip_is_a_checksum_error():
    # the whole-file checksum resealed: the block checksum covers the payload
    m2 = fixture("manifest_v2")
    for at in (68, 75, 116, 118, 132):
        with pytest.raises(ChecksumError):
            artifacts.read_manifest(_reseal_file(_flip(m2, at)))


def test_zgr3_body_flip_is_a_checksum_error():
    m3 = fixture("manifest_v3")
    n = len(m3)
    for at in (104, 108, 228, 230, 1480):
        d = _flip(m3, at)
        bl = struct.unpack_from("<Q", d, 32)[0]
        d[40 + bl:48 + bl] = _u64(xxh3_64(bytes(d[40:40 + bl])))  # block checksum resealed
        with pytest.raises(ChecksumError) as exc:
            artifacts.read_manifest(_reseal_file(d))
        assert exc.value.offset == n - 16 - 8, at  # the ZGR3 section checksum


def test_purge_payload_flip_is_a_checksum_error():
    data = artifacts.purge_file(2, [0x00112233445566778899AABBCCDDEEFF])
    with pytest.raises(ChecksumError):
        artifacts.read_purge(_reseal_file(_flip(data, 52)))


def test_graph_wal_header_flip_is_a_checksum_error():
    env = fixture("wal_graph_commit_v1")[14:-8]
    data = graphwal.file_header(5, 1) + env
    for at in (12, 16, 24, 40):
        with pytest.raises(ChecksumError):
            graphwal.replay(bytes(_flip(data, at, 4)))


def test_envelope_frame_flip_is_a_checksum_error():
    env = fixture("wal_graph_commit_v1")[14:-8]
    kind_at = ze.LAYOUT["zgw_frame_header"]["layouts"][0]["fields"]
    kind_at = next(f["offset"] for f in kind_at if f["name"] == "kind")
    for at in (kind_at, 44, 64 + 17, 200, len(env) - 100):
        with pytest.raises(ChecksumError):
            envelope.validate(bytes(_flip(env, at, 0x40)))


def test_graph_blocks_trailer_flip_is_a_checksum_error():
    g = fixture("graph_node_blocks_d128_r44_FROZEN_v1")
    for at in (1152 - 128 + 10, 1152 - 128 + 22, 64 + 13, 64 + 14, 1152 - 128 + 12):
        with pytest.raises(ChecksumError):
            graph.open_blocks(bytes(_flip(g, at, 4)))


def test_wal_record_flip_is_a_checksum_error():
    rec = fixture("wal_metadata_edit_record_v1")
    for at in (12, 14, 16, 14 + 32 + 1, 14 + 28):
        with pytest.raises(ChecksumError):
            wal.decode_record(bytes(_flip(rec, at, 2)))


# -- 3. registered opaque region kinds are skipped ----------------------------------------

@pytest.mark.parametrize("kind", [6, 8, 9, 10, 4096])
def test_verify_and_dump_skip_registered_opaque_kinds(kind, tmp_path, capsys):
    seg = segment.build_segment(bytes(16), 1, 4, 3, [(2, fixture("alive_one_v1")),
                                                      (kind, b"opaque bytes")])
    path = tmp_path / "s.zseg"
    path.write_bytes(seg)
    assert kind in segment.open_segment(seg).entries
    assert main(["ze", "verify", str(path)]) == 0, capsys.readouterr().out
    assert main(["ze", "dump", str(path)]) == 0, capsys.readouterr().out
    # the opaque region's checksum is still verified
    bad = bytearray(seg)
    e = segment.open_segment(seg).entries[kind]
    bad[e.offset] ^= 1
    path.write_bytes(bytes(bad))
    capsys.readouterr()
    assert main(["ze", "verify", str(path)]) == 1


# -- 4. an all-Unstamped TSR1 is not written ----------------------------------------------

def test_all_unstamped_ranges_write_no_range_bytes():
    base = artifacts.read_manifest(fixture("manifest_v2")).block.payload
    n = len(base.segments)
    ranges = [ze.ClusteringRange(ze.RangeTag.unstamped, 0, 0) for _ in range(n)]
    tsr1 = ze.ManifestExtension(artifacts.TSR1, ze.Tsr1Body(ranges))
    with_tsr1 = dataclasses.replace(base, extensions=[tsr1])
    data = artifacts.manifest_file(with_tsr1)
    back = artifacts.read_manifest(data)
    assert back.block.payload.extensions == []
    assert data == artifacts.manifest_file(base)


# -- 5. versions follow the registry ------------------------------------------------------

def _set_range(monkeypatch, family: int, lo: int, hi: int) -> None:
    name, current, _ = ze.REGISTRIES["ze_family"][family]
    monkeypatch.setitem(ze.REGISTRIES["ze_family"], family, (name, current, (lo, hi)))


def test_wal_reader_follows_the_registry(monkeypatch):
    data = bytearray(fixture("wal_multi_v1"))
    data[10:12] = struct.pack("<H", 2)
    assert wal.replay(bytes(data)).terminator == "invalid_header"
    _set_range(monkeypatch, 11, 1, 2)
    r = wal.replay(bytes(data))
    assert r.terminator == "clean" and len(r.records) == 3
    _set_range(monkeypatch, 11, 2, 2)
    assert wal.replay(fixture("wal_multi_v1")).terminator == "invalid_header"


def test_graph_wal_reader_follows_the_registry(monkeypatch):
    env = fixture("wal_graph_commit_v1")[14:-8]
    store = envelope.validate(env).begin.payload.store
    head = bytearray(graphwal.file_header(store, 1))
    head[10:12] = struct.pack("<H", 2)
    head[56:64] = _u64(xxh3_64(bytes(head[:56])))
    data = bytes(head) + env
    with pytest.raises(DecodeError, match="unsupported"):
        graphwal.replay(data)
    _set_range(monkeypatch, 19, 1, 2)
    assert len(graphwal.replay(data).envelopes) == 1
    _set_range(monkeypatch, 19, 2, 2)
    with pytest.raises(DecodeError, match="unsupported"):
        graphwal.replay(graphwal.file_header(store, 1) + env)


MANIFEST_ROW = ('      manifest: {value: 10, current: 2, accepted: [2, 3], '
                'doc: "v2 graph-free, v3 with ZGR3; v1 refused"}\n')


@functools.cache
def _old_side():
    """The shipped ze.yaml as the old side (loaded once: ``diff.compare`` only reads it)."""
    from bytewright.generator import pipeline
    from bytewright.review import diff
    path = pipeline.SCHEMA_DIR / "ze.yaml"
    text = path.read_text(encoding="utf-8")
    return diff.load_texts({path: text}, "old", base=pipeline.PACKAGE_ROOT)


def _diff(new_row: str):
    from bytewright.generator import pipeline
    from bytewright.review import diff
    path = pipeline.SCHEMA_DIR / "ze.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count(MANIFEST_ROW) == 1
    old = _old_side()
    new = diff.load_texts({path: text.replace(MANIFEST_ROW, new_row)}, "new",
                          base=pipeline.PACKAGE_ROOT)
    return diff.compare(old, new)


def test_diff_reports_a_narrowed_registry_range_as_breaking():
    rep = _diff(MANIFEST_ROW.replace("accepted: [2, 3]", "accepted: [2, 2]"))
    assert rep.findings and rep.breaking and rep.exit_code == 1
    assert any("narrowed" in f.message for f in rep.findings)


def test_diff_reports_a_widened_registry_range_as_additive():
    rep = _diff(MANIFEST_ROW.replace("accepted: [2, 3]", "accepted: [2, 4]"))
    assert rep.findings and not rep.breaking and rep.exit_code == 0
    assert any("widened" in f.message for f in rep.findings)
