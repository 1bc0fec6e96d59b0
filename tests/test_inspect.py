"""``inspect FILE``: detection from the bytes, the field tree, corrupt input, streaming."""

from __future__ import annotations

import importlib
import io
from pathlib import Path

import pytest

from bytewright.generator import pipeline
from bytewright.review import checks, inspector

FIXTURES = sorted(checks.FIXTURE_DIR.glob("*/*.hex"))
# layouts that end in a to-the-end byte field: one byte less is still a valid record
EOS_TAIL = {"columns_one_v1.hex", "columns_zero_v1.hex", "stored_metadata_one_v1.hex"}


@pytest.fixture(scope="module")
def families():
    return pipeline.run(render_modules=False).families


def modules(name: str):
    return importlib.import_module(f"bytewright.generated.{name}")


def fixture(path: Path):
    return checks.parse_fixture(path, path.read_text(encoding="utf-8"))


def run(data: bytes, families, fx=None, hint: str = "", **kw) -> inspector.Result:
    target = inspector.choose(data[:64], families, fixture=fx, hint=hint)
    return inspector.run_target(io.BytesIO(data), len(data), target, modules, **kw)


def test_every_family_declares_detection(families):
    assert set(families) == {"htt", "kladde", "pile", "ze"}
    for fam in families.values():
        assert fam.detect, fam.name
        for rule in fam.detect:
            assert rule.record in fam.records and inspector.magics(fam, rule)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_unaided(path, families):
    fx = fixture(path)
    res = run(fx.data, families, fx, hint=path.parent.name)
    assert res.ok, (res.failure, [n.checksum for n in res.bad_checksums])
    assert res.record == fx.record and res.family == path.parent.name
    if fx.data:
        top = res.records[0]
        assert top.offset == 0 and top.end == len(fx.data)
        leaves = [n for n in top.walk() if not n.children and n.region is None
                  and n.offset is not None]
        for n in leaves:  # every field sits inside the bytes, in order of the file
            assert 0 <= n.offset <= n.end <= len(fx.data), n
    assert "ok:" in inspector.render_text(res)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_corrupted(path, families):
    fx = fixture(path)
    if not fx.data:
        pytest.skip("an empty fixture has no byte to damage")
    cut = fx.data[:-1]
    res = run(cut, families, fx, hint=path.parent.name)
    if path.name in EOS_TAIL:
        assert res.ok and res.records[0].end == len(cut)
    else:
        assert not res.ok and res.failure is not None
        assert res.failure.offset is not None and res.failure.path
        text = inspector.render_text(res)
        assert "error: offset" in text and "Traceback" not in text
        assert res.records  # everything decoded before the failure is kept
    flipped = bytearray(fx.data)
    flipped[len(flipped) // 2] ^= 0x5A
    res = run(bytes(flipped), families, fx, hint=path.parent.name)  # never raises
    assert res.ok or res.failure is not None or res.bad_checksums


RAW = [p for p in FIXTURES if fixture(p).record in
       {"htt_file", "sidecar_segment", "header_page", "pile_record", "frame_file",
        "manifest_file", "wal_file", "segment_header"}]


@pytest.mark.parametrize("path", RAW, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_raw_bytes_are_detected_by_magic(path, families):
    """No fixture header: the family's detect rule picks the record from the bytes."""
    fx = fixture(path)
    res = run(fx.data, families)
    assert res.family == path.parent.name and res.how.startswith("detected:")
    assert res.ok, res.failure


def test_unknown_bytes(families):
    with pytest.raises(inspector.InspectError, match="no family recognises"):
        run(b"\x00" * 40, families)


def test_values_by_name_fixed_point_and_at(families):
    path = checks.FIXTURE_DIR / "htt" / "02_structural_only.hex"
    res = run(fixture(path).data, families)
    nodes = {n.path: n for top in res.records for n in top.walk()}
    assert nodes["htt_file.header.tau"].text.startswith("1 (q64.64")
    assert nodes["htt_file.header.header_crc"].checksum == "ok"
    assert nodes["htt_file.header.magic"].text == "4 bytes 48545400"
    chain = res.cover(9)
    assert [n.path for n in chain] == ["htt_file", "htt_file.header", "htt_file.header.tau"]
    assert "offset 9 is in htt_file.header.tau" in inspector.render_at(res, 9)
    wal = run(fixture(checks.FIXTURE_DIR / "htt" / "wal_all_ops_v2.hex").data, families)
    ops = [n.text for top in wal.records for n in top.walk() if n.name == "op"]
    assert "INSERT (1)" in ops and "EPOCH (6)" in ops  # enums by name
    flags = nodes["htt_file.header.flags"].text
    assert flags.startswith("{") and "algorithm=" not in flags or "zstd" in flags


def test_bad_checksum_is_reported_and_decoding_goes_on(families):
    data = bytearray(fixture(checks.FIXTURE_DIR / "htt" / "02_structural_only.hex").data)
    data[6] ^= 1  # the header's dimension byte, covered by header_crc
    res = run(bytes(data), families)
    assert not res.ok and res.failure is None
    (bad,) = res.bad_checksums
    assert bad.path == "htt_file.header.header_crc"
    assert bad.checksum.startswith("expected 0x") and ", found 0x" in bad.checksum
    assert any(n.path.startswith("htt_file.wal") for top in res.records for n in top.walk())
    assert "CHECKSUM BAD" in inspector.render_text(res)


def test_json_tree_and_hex_dump(families):
    data = fixture(checks.FIXTURE_DIR / "htt" / "01_empty.hex").data
    res = run(data, families)
    doc = res.as_dict()
    assert doc["ok"] and doc["family"] == "htt" and doc["records"][0]["name"] == "htt_file"
    header = doc["records"][0]["children"][0]
    assert header["children"][0] == {"name": "magic", "path": "htt_file.header.magic",
                                     "kind": "field", "offset": 0, "size": 4,
                                     "value": "4 bytes 48545400"}
    text = inspector.render_text(res, read=lambda o, n: data[o:o + n])
    assert "| 48 54 54 00" in text


class CountingFile(io.RawIOBase):
    """A file that counts the bytes handed out (to prove the reader streams)."""

    def __init__(self, path: Path) -> None:
        self.f = path.open("rb")
        self.read_total = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.f.seek(pos, whence)

    def tell(self) -> int:
        return self.f.tell()

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.read_total += len(data)
        return data


def test_streams_repeated_records_with_limit(tmp_path, families):
    one = fixture(checks.FIXTURE_DIR / "pile" / "blob_hello.hex").data
    big = tmp_path / "big.pile"
    big.write_bytes(one * 2000)
    size = big.stat().st_size
    stream = CountingFile(big)
    target = inspector.choose(one[:64], families)
    assert target.repeat and target.family.name == "pile"
    res = inspector.run_target(stream, size, target, modules, limit=5)
    assert len(res.records) == 5 and res.truncated and res.failure is None
    assert [r.path for r in res.records] == [f"pile_record[{i}]" for i in range(5)]
    assert res.records[4].offset == 4 * len(one)
    # read as far as needed (each sized part at most twice), not the 1 MB file
    assert stream.read_total <= 2 * 5 * len(one) < size // 50
    seen, handed = [], []
    res = inspector.run_target(CountingFile(big), size, target, modules, progress=seen.append,
                               on_record=lambda n: handed.append(n.offset))
    assert res.ok and res.count == 2000 and seen[-1] == size
    assert res.records == []  # streamed away: memory holds one record at a time
    assert handed == [i * len(one) for i in range(2000)]


@pytest.mark.parametrize("rule,needle", [
    ('{record: nope, magic: "hex:00"}', "unknown record 'nope'"),
    ('{record: rec, magic: "hex:zz"}', "magic must be"),
    ('{record: rec, tags: a}', "not a switch field"),
    ('{record: rec}', "give magic bytes or tags"),
    ('{record: rec, magic: "hex:00", then: gone}', "unknown record 'gone'"),
])
def test_bad_detect_rules_are_schema_problems(rule, needle, tmp_path):
    path = tmp_path / "x.yaml"
    text = ("bytewright: 1\nfamily: x\n"
            f"detect: [{rule}]\n"
            "records:\n  rec:\n    fields:\n      - {name: a, type: u8}\n")
    res = pipeline.run([path], texts={str(path): text}, base=tmp_path)
    assert any(needle in str(p) for p in res.problems), [str(p) for p in res.problems]


def test_detect_rule_with_text_magic_and_offset(tmp_path):
    path = tmp_path / "x.yaml"
    text = ("bytewright: 1\nfamily: x\n"
            "detect: [{record: rec, magic: \"XY\", at: 1}]\n"
            "records:\n  rec:\n    fields:\n      - {name: a, type: u8}\n"
            "      - {name: tag, type: bytes, size: 2}\n")
    res = pipeline.run([path], texts={str(path): text}, base=tmp_path)
    assert not res.problems
    fam, rule = inspector.detect(b"\x07XY", res.families)
    assert (fam.name, rule.record, rule.at, rule.magic) == ("x", "rec", 1, b"XY")
    assert inspector.detect(b"XY\x00", res.families) is None
