"""``bytewright check``: the cache of clean families, ``--family``, ``--json``, ``--junit``,
``--no-cache`` and the exit codes (docs/project-file.md, "Checking a project")."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.generator import pipeline
from bytewright.review import check_run

OTHER = """\
bytewright: 1
family: other
title: A second family
endian: le
records:
  pair:
    doc: Two bytes.
    fields:
      - {name: a, type: u8}
      - {name: b, type: u8}
"""


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """An ``init`` project with a second family, generated and checked once (so each copy
    starts with a warm cache)."""
    root = tmp_path_factory.mktemp("checkverb") / "proj"
    assert main(["init", str(root)]) == 0
    (root / "schemas" / "other.yaml").write_text(OTHER, encoding="utf-8")
    assert main(["generate", "--project", str(root)]) == 0
    assert main(["check", "--no-compiled", "--project", str(root)]) == 0
    assert (root / ".bytewright-cache" / "check.json").is_file()
    return root


@pytest.fixture
def proj(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(template, root)
    return root


@pytest.fixture
def no_emission(monkeypatch) -> list[str]:
    """Count (and forbid nothing): every family the generator emits is recorded."""
    emitted: list[str] = []
    real = pipeline.render

    def render(family, problems=None):
        emitted.append(family.name)
        return real(family, problems)

    monkeypatch.setattr(pipeline, "render", render)
    return emitted


def check_json(proj: Path, capsys, *extra: str) -> tuple[int, dict]:
    code, out, err = run(["check", "--project", str(proj), "--json", "--no-compiled", *extra],
                         capsys)
    return code, json.loads(out)


# -- the cache -----------------------------------------------------------------------------

def test_warm_cache_skips_emission_of_unchanged_families(proj, capsys, no_emission):
    shutil.rmtree(proj / ".bytewright-cache")
    code, doc = check_json(proj, capsys)
    assert code == 0 and sorted(no_emission) == ["notes", "other"]
    assert not any(f["drift"]["cached"] for f in doc["families"].values())
    ignore = proj / ".bytewright-cache" / ".gitignore"
    assert "*" in ignore.read_text().split()  # git never sees the cache
    no_emission.clear()
    code, doc = check_json(proj, capsys)
    assert code == 0 and no_emission == []
    assert all(f["drift"]["cached"] and f["drift"]["ok"] for f in doc["families"].values())
    assert doc["families"]["notes"]["fixtures"]["passed"] == ["notes/two_notes.hex"]


def test_warm_cache_still_catches_a_changed_schema(proj, capsys, no_emission):
    schema = proj / "schemas" / "notes.yaml"
    schema.write_text(schema.read_text().replace("type: u16, valid", "type: u32, valid"))
    code, doc = check_json(proj, capsys)
    assert code == 1 and no_emission == ["notes"]
    drift = doc["families"]["notes"]["drift"]
    assert not drift["ok"] and "notes_file" in drift["records"]
    assert doc["families"]["other"]["drift"]["cached"]


def test_warm_cache_still_catches_a_hand_edited_module(proj, capsys):
    module = proj / "generated" / "notes.py"
    module.write_text(module.read_text().replace("def _d_note(", "def _d_note_x(", 1))
    code, _, err = run(["check", "--no-compiled", "--project", str(proj)], capsys)
    assert code == 1 and "DRIFT generated/notes.py" in err
    code, _, err = run(["check", "--no-compiled", "--project", str(proj), "--family", "notes"],
                       capsys)
    assert code == 1 and "DRIFT generated/notes.py" in err


def test_no_cache_emits_every_family(proj, capsys, no_emission):
    code, doc = check_json(proj, capsys, "--no-cache")
    assert code == 0 and sorted(no_emission) == ["notes", "other"]
    assert not any(f["drift"]["cached"] for f in doc["families"].values())


# -- --family ------------------------------------------------------------------------------

def test_family_checks_only_that_family(proj, capsys, no_emission):
    other = proj / "generated" / "other.py"
    other.write_text(other.read_text() + "# edited\n")
    fx = proj / "fixtures" / "other"
    fx.mkdir()
    (fx / "bad.hex").write_text("#: record: pair\n0102 03\n")  # one byte too many
    code, doc = check_json(proj, capsys, "--family", "notes")
    assert code == 0 and no_emission == []  # other.py is not even looked at
    assert list(doc["families"]) == ["notes"]
    assert doc["totals"] == {"families": 1, "drift": 0, "fixtures_passed": 1,
                             "fixtures_failed": 0}
    code, doc = check_json(proj, capsys, "--family", "other")
    assert code == 1 and list(doc["families"]) == ["other"]
    assert not doc["families"]["other"]["drift"]["ok"]


def test_a_module_no_schema_generates_is_drift_of_the_project(proj, capsys):
    shutil.copy(proj / "generated" / "other.py", proj / "generated" / "gone.py")
    code, _, err = run(["check", "--no-compiled", "--project", str(proj)], capsys)
    assert code == 1 and "DRIFT generated/gone.py" in err
    code, doc = check_json(proj, capsys)
    assert [o["module"] for o in doc["orphans"]] == ["generated/gone.py"]
    assert doc["totals"]["drift"] == 1
    assert check_json(proj, capsys, "--family", "notes")[0] == 0  # not notes' business


def test_unknown_family_is_a_usage_error_on_one_line(proj, capsys):
    code, out, err = run(["check", "--project", str(proj), "--family", "nope", "--json"],
                         capsys)
    assert code == 2 and out == ""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("project: ")]
    assert len(lines) == 1 and "'nope'" in lines[0] and "notes" in lines[0]


# -- --json and --junit ---------------------------------------------------------------------

def _break_fixture(proj: Path) -> None:
    path = proj / "fixtures" / "notes" / "two_notes.hex"
    text = path.read_text()
    path.write_text(text.replace("4e4f5445 0100", "4e4f5445 0200"))  # version 2: invalid


def test_json_reports_failed_fixtures_by_name_with_a_message(proj, capsys):
    _break_fixture(proj)
    code, doc = check_json(proj, capsys)
    assert code == 1 and doc["exit_code"] == 1 and doc["ok"] is False
    fixtures = doc["families"]["notes"]["fixtures"]
    assert fixtures["passed"] == []
    (failed,) = fixtures["failed"]
    assert failed["name"] == "notes/two_notes.hex" and failed["record"] == "notes_file"
    assert failed["message"]
    assert doc["totals"]["fixtures_failed"] == 1 and doc["totals"]["drift"] == 0


def test_junit_has_a_testcase_per_fixture_and_per_drift_check(proj, capsys, tmp_path):
    _break_fixture(proj)
    report = tmp_path / "check.xml"
    code, out, _ = run(["check", "--no-compiled", "--project", str(proj), "--junit",
                        str(report)], capsys)
    assert code == 1 and "0 passed, 1 failed" in out  # the text output is still printed
    root = ET.parse(report).getroot()
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert set(cases) == {("notes", "drift generated/notes.py"),
                          ("notes", "notes/two_notes.hex"),
                          ("other", "drift generated/other.py")}
    assert cases[("notes", "notes/two_notes.hex")].find("failure") is not None
    assert cases[("notes", "drift generated/notes.py")].find("failure") is None
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "notes")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")


def test_junit_reports_drift_as_a_failure(proj, capsys, tmp_path):
    (proj / "generated" / "other.py").unlink()
    report = tmp_path / "check.xml"
    assert run(["check", "--no-compiled", "--project", str(proj), "--junit", str(report)],
               capsys)[0] == 1
    cases = {c.get("name"): c for c in ET.parse(report).getroot().iter("testcase")}
    failure = cases["drift generated/other.py"].find("failure")
    assert failure is not None and "not generated yet" in failure.get("message")


# -- exit codes -----------------------------------------------------------------------------

def test_schema_problems_exit_2(proj, capsys):
    (proj / "schemas" / "other.yaml").write_text(OTHER.replace("type: u8}", "type: u7}"))
    code, _, err = run(["check", "--no-compiled", "--project", str(proj)], capsys)
    assert code == 2 and "other.yaml" in err
    code, doc = check_json(proj, capsys)
    assert code == 2 and doc["problems"] and doc["exit_code"] == 2


def test_missing_schemas_exit_3(proj, capsys):
    shutil.rmtree(proj / "schemas")
    assert run(["check", "--no-compiled", "--project", str(proj)], capsys)[0] == 3


def test_internal_error_exits_4(proj, capsys, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("unexpected")

    monkeypatch.setattr(check_run.checks, "family_drift", boom)
    code, _, err = run(["check", "--no-compiled", "--project", str(proj)], capsys)
    assert code == 4 and "internal error" in err


def test_unreadable_cache_is_ignored(proj, capsys):
    cache = proj / ".bytewright-cache"
    cache.mkdir(exist_ok=True)
    (cache / "check.json").write_text("{not json")
    code, doc = check_json(proj, capsys)
    assert code == 0 and not doc["families"]["notes"]["drift"]["cached"]
    assert json.loads((cache / "check.json").read_text())["clean"].keys() == {"notes", "other"}
