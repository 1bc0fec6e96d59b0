"""``check``'s drift message names records from the layouts (IR), not from code text."""

from __future__ import annotations

from pathlib import Path

from bytewright.generator import pipeline
from bytewright.review import diff

ROOT = Path(__file__).resolve().parent
BASE_PATH = ROOT / "data" / "diff_demo.yaml"
BASE = BASE_PATH.read_text(encoding="utf-8")
COUNT = '      - {name: count, type: u16, doc: "entries"}\n'
STAMP = '      - {name: stamp, type: u32, doc: "creation time"}\n'


def _result(text: str) -> pipeline.Result:
    return pipeline.run([BASE_PATH], texts={str(BASE_PATH): text}, base=ROOT.parent)


def test_drift_names_exactly_the_changed_records():
    checked_in = _result(BASE).modules["demo.py"]
    fam = _result(BASE.replace(COUNT, COUNT.replace("u16", "u32"))).families["demo"]
    assert diff.drift_records(checked_in, fam) == ["header"]
    fam = _result(BASE.replace("    doc: One entry.\n", "    doc: One entry, v2.\n")
                  ).families["demo"]
    assert diff.drift_records(checked_in, fam) == ["entry"]


def test_line_moves_and_identical_layouts_name_nothing():
    checked_in = _result(BASE).modules["demo.py"]
    moved = _result("# comment moves every line\n" + BASE)
    assert moved.modules["demo.py"] != checked_in  # LAYOUT carries lines ...
    assert diff.drift_records(checked_in, moved.families["demo"]) == []  # ... not a change


def test_removed_record_and_unreadable_module():
    fam = _result(BASE.replace(STAMP, "")).families["demo"]
    checked_in = _result(BASE).modules["demo.py"]
    assert diff.drift_records(checked_in, fam) == ["header"]
    # a module with no LAYOUT (hand-damaged): every record is named
    assert diff.drift_records("x = 1\n", fam) == sorted(fam.records)
    assert diff.drift_records("def (:\n", fam) == sorted(fam.records)
