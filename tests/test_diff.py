"""``bytewright diff``: golden outputs for curated edits of the shipped HTT schema.

Each case edits ``schemas/htt.yaml`` in memory (``texts=``) and compares the rendered text
and JSON reports with ``tests/golden/diff/<case>.{txt,json}``. Regenerate the goldens
with ``BYTEWRIGHT_UPDATE_GOLDEN=1`` after reviewing the change.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bytewright.cli import main as cli_main
from bytewright.generator import pipeline
from bytewright.review import diff, diff_rules

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "diff"
HTT = pipeline.SCHEMA_DIR / "htt.yaml"
HTT_TEXT = HTT.read_text(encoding="utf-8")
UPDATE = os.environ.get("BYTEWRIGHT_UPDATE_GOLDEN") == "1"


def edit(text: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert text.count(old) == 1, f"edit anchor not unique/found: {old!r}"
        text = text.replace(old, new)
    return text


NODE_COUNT = '      - {name: node_count, type: u32, doc: "snapshot entries at compaction (advisory)"}\n'
EPOCH = '      EPOCH: {value: 6, doc: "seal marker; advances the epoch counter"}\n'
WAL_OP_DOC = "    doc: WAL operation code; 0x07-0xFF are reserved.\n"
SNAP_CRC_DOC = "        doc: CRC32 of the raw (decompressed) entry bytes; CRC of nothing when empty.\n"

CASES: dict[str, tuple[str, str]] = {
    "field_widened": (HTT_TEXT, edit(HTT_TEXT, (NODE_COUNT, NODE_COUNT.replace("u32", "u64")))),
    "field_inserted": (HTT_TEXT, edit(HTT_TEXT, (
        '      - {name: semantic_dims, type: u8, doc: "number of semantic dimensions (0 = none)"}\n',
        '      - {name: semantic_dims, type: u8, doc: "number of semantic dimensions (0 = none)"}\n'
        '      - {name: header_flags2, type: u8, doc: "more feature flags"}\n'))),
    "op_added": (HTT_TEXT, edit(HTT_TEXT, (
        EPOCH, EPOCH + '      COMPACT: {value: 7, doc: "compaction marker"}\n'))),
    "op_renumbered": (HTT_TEXT, edit(HTT_TEXT, (EPOCH, EPOCH.replace("value: 6", "value: 9")))),
    "retired_reused": (
        edit(HTT_TEXT, (WAL_OP_DOC, WAL_OP_DOC + "    retired: [7]\n")),
        edit(HTT_TEXT, (EPOCH, EPOCH + '      COMPACT: {value: 7, doc: "compaction marker"}\n'))),
    "id_reassigned": (HTT_TEXT, edit(HTT_TEXT,
        ('      DELETE: {value: 3, doc: "remove node"}\n',
         '      PURGE: {value: 3, doc: "remove node and history"}\n'),
        ("          DELETE: empty\n", "          PURGE: empty\n"))),
    "version_bumped": (HTT_TEXT, edit(HTT_TEXT,
        ("  accepted: [1, 4]\n", "  accepted: [1, 5]\n"),
        ("    versions: {from: version, range: [1, 4]}\n",
         "    versions: {from: version, range: [1, 5]}\n"),
        (SNAP_CRC_DOC, SNAP_CRC_DOC
         + "      - {name: snapshot_flags, type: u8, since: 5, doc: \"v5 snapshot flags\"}\n"))),
    "doc_only": (HTT_TEXT, edit(HTT_TEXT,
        (NODE_COUNT, NODE_COUNT.replace("(advisory)", "(advisory; readers ignore it)")),
        (WAL_OP_DOC, "    doc: WAL operation code; 0x07-0xFF are reserved for future ops.\n"))),
}


@functools.cache
def side(text: str, label: str) -> diff.Side:
    # The cases share their texts (most start from the shipped htt.yaml): each distinct
    # text is loaded once per process; ``diff.compare`` only reads the sides it is given.
    return diff.load_texts({HTT: text}, label, base=pipeline.PACKAGE_ROOT)


def report(case: str, allow: set[str] | None = None) -> diff.Report:
    old, new = CASES[case]
    return diff.compare(side(old, "old"), side(new, "new"), allow)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        if not UPDATE and os.environ.get("CI"):
            pytest.fail(f"missing golden {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"output differs from golden {path}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_text_and_json(case):
    """Goldens carry files, not YAML line numbers: an edit above a record churns nothing."""
    rep = report(case)
    check_golden(f"{case}.txt", diff.render_text(rep, False))
    check_golden(f"{case}.json", diff.render_json(rep, False))


def test_goldens_ignore_line_moves():
    """The same edit below a comment block added at the top renders the same golden."""
    old, new = CASES["field_widened"]
    pad = "# a comment\n# another\n"
    moved = diff.compare(side(pad + old, "old"), side(pad + new, "new"))
    assert diff.render_text(moved, False) == diff.render_text(report("field_widened"), False)
    assert diff.render_text(moved) != diff.render_text(report("field_widened"))


EXPECTED = {  # case -> (rule ids that must be present, breaking?)
    "field_widened": ({"W004"}, True),
    "field_inserted": ({"W002"}, True),
    "op_added": ({"A001"}, False),
    "op_renumbered": ({"I001"}, True),
    "retired_reused": ({"I004"}, True),
    "id_reassigned": ({"P004"}, True),
    "version_bumped": ({"A006", "A008", "P006"}, True),
    "doc_only": ({"D001", "D003"}, False),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_classification(case):
    rep = report(case)
    ids = {f.rule.id for f in rep.findings}
    want, breaking = EXPECTED[case]
    assert want <= ids, ids
    assert bool(rep.breaking) is breaking
    assert rep.exit_code == (1 if breaking else 0)
    for f in rep.findings:  # both locations are reported, with lines
        assert f.old is not None and f.new is not None, f
        assert f.old.file == "schemas/htt.yaml" and f.new.file == "schemas/htt.yaml"
        assert f.old.line and f.new.line, f


def test_widened_details():
    rep = report("field_widened")
    by = {(f.rule.id, f.subject): f for f in rep.findings}
    w = by["W004", "htt.file_header.node_count"]
    assert "u32 -> u64" in w.message and "size 4 -> 8" in w.message
    assert "without a version bump" in w.message
    line = HTT_TEXT[:HTT_TEXT.index(NODE_COUNT)].count("\n") + 1
    assert w.old.line == line and w.new.line == line
    assert not [f for f in rep.findings if f.rule.id in ("W005", "W011")]  # nested
    assert "header_crc: offset 28 -> 32" in w.details
    assert not [f for f in rep.findings if f.rule.category in ("ADDITIVE", "DOC")]


def test_inserted_shifts_offsets():
    rep = report("field_inserted")
    msgs = [f.message for f in rep.findings if f.rule.id == "W002"]
    assert msgs == ["field header_flags2 (u8) inserted before tau at offset 8 "
                    "without a version bump (unversioned record)"]
    (cause,) = [f for f in rep.findings if f.rule.id == "W002"]
    shifted = {d.split(":")[0] for d in cause.details}
    assert {"tau", "node_count", "header_crc", "record"} <= shifted
    # the header is embedded in htt_file: the change propagates to its later fields
    (emb,) = [f for f in rep.findings if f.subject == "htt.htt_file.header"]
    assert any(d.startswith("bounds: offset") for d in emb.details)


def test_version_bump_is_additive_and_reports_the_gated_field():
    rep = report("version_bumped")
    cats = {f.rule.category for f in rep.findings}
    # the new field has no default: v1-4 objects hold None there (API-BREAKING)
    assert cats == {"ADDITIVE", "API-BREAKING"}, [str(f.as_dict()) for f in rep.findings]
    (gated,) = [f for f in rep.findings if f.rule.category == "API-BREAKING"]
    assert gated.rule.id == "P006" and "v1-4" in gated.message
    added = [f for f in rep.findings if f.rule.id == "A006"]
    assert len(added) == 1 and "v5" in added[0].message and "snapshot_flags" in added[0].message


def test_layout_change_to_existing_version_is_wire_breaking():
    """Adding a field to v2-4 of snapshot_section (no new version) is WIRE-BREAKING."""
    new = edit(HTT_TEXT, (SNAP_CRC_DOC, SNAP_CRC_DOC
                          + "      - {name: snapshot_flags, type: u8, since: 2}\n"))
    rep = diff.compare(side(HTT_TEXT, "old"), side(new, "new"))
    hits = [f for f in rep.findings if f.rule.id == "W002"]
    assert len(hits) == 1
    assert "v2-4 of snapshot_section without a version bump" in hits[0].message
    assert rep.exit_code == 1


def test_allow_makes_exit_zero():
    # renumbering EPOCH also moves its switch case in wal_entry.body (W010)
    assert {f.rule.id for f in report("op_renumbered").findings} == {"I001", "W010", "A007"}
    rep = report("op_renumbered", allow={"I001", "W010"})
    assert rep.exit_code == 0
    assert all(f.allowed for f in rep.findings if f.rule.id == "I001")
    assert "(allowed)" in diff.render_text(rep)
    assert report("op_renumbered", allow={"id-renumbered", "switch-case-changed"}).exit_code == 0
    assert report("op_renumbered", allow={"I001"}).exit_code == 1
    assert report("op_renumbered", allow={"W004"}).exit_code == 1


def test_github_annotations():
    text = diff.render_github(report("field_widened"))
    line = next(x for x in text.splitlines() if "W004" in x)
    assert line.startswith("::error file=schemas/htt.yaml,line=")
    assert "title=WIRE-BREAKING W004 field-type-changed::htt.file_header.node_count" in line
    add = diff.render_github(report("op_added")).splitlines()[0]
    assert add.startswith("::notice file=schemas/htt.yaml,line=")


@pytest.mark.parametrize("path", pipeline.schema_files(), ids=lambda p: p.name)
def test_every_shipped_schema_against_itself_is_empty(path):
    a = diff.load_path(path, "a", pipeline.PACKAGE_ROOT)
    b = diff.load_path(path, "b", pipeline.PACKAGE_ROOT)
    rep = diff.compare(a, b)
    assert rep.findings == [] and rep.exit_code == 0
    assert diff.code_diff(a, b) == ""


def test_rules_are_records():
    ids = [r.id for r in diff_rules.RULES]
    assert len(ids) == len(set(ids))
    for r in diff_rules.RULES:
        assert r.category in diff_rules.CATEGORIES and r.purpose and callable(r.check)
        assert r.id[0] == {"WIRE-BREAKING": "W", "API-BREAKING": "P", "ID-CONTRACT": "I",
                           "ADDITIVE": "A", "DOC": "D"}[r.category]


def test_cli_folders_json_and_code(tmp_path, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "htt.yaml").write_text(CASES["field_widened"][0], encoding="utf-8")
    (new / "htt.yaml").write_text(CASES["field_widened"][1], encoding="utf-8")
    assert cli_main.main(["diff", str(old), str(new), "--format", "json", "--code"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "bytewright-diff" and doc["breaking"] is True
    assert any(f["rule"] == "W004" for f in doc["findings"])
    assert "+++ b/generated/htt.py" in doc["code_diff"]
    assert cli_main.main(["diff", str(old / "htt.yaml"), str(new / "htt.yaml"),
                          "--allow", "W004", "--allow", "W005", "--allow", "W011"]) == 0
    capsys.readouterr()
    assert cli_main.main(["diff", str(old), str(old)]) == 0
    assert "no changes" in capsys.readouterr().out


def test_cli_versions_mode(capsys):
    assert cli_main.main(["diff", "--versions", "sidecar_segment"]) == 0
    out = capsys.readouterr().out
    assert "v1 -> v2 of sidecar_segment" in out and "reserved6" in out and "layout" in out
    assert cli_main.main(["diff", "--versions", "no_such_record"]) == 2


def _has_head() -> bool:
    proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=ROOT,
                          capture_output=True, check=False)
    return proc.returncode == 0


def test_against_head_cli():
    """``diff --against HEAD`` on this repository (read-only git)."""
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; from bytewright.cli.main import main; "
                           "sys.exit(main(sys.argv[1:]))",
                           "diff", "--against", "HEAD", "--format", "json"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if not _has_head():
        assert proc.returncode == 2
        assert "no commits yet" in proc.stderr
        return
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["old"].startswith("HEAD (")
    for f in doc["findings"]:
        if f["old"]:
            assert f["old"]["file"].startswith("HEAD:")


def test_against_bad_revision(capsys):
    assert cli_main.main(["diff", "--against", "no-such-rev-xyz"]) == 2
    assert "not a git revision" in capsys.readouterr().err
