"""Verbs that read layouts do not emit code; progress only on a terminal; ``init``
refuses module names that would not work; verbs that write files or read a repository's
history refuse to fall back to the package's own project (docs/project-file.md)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.cli.progress import Progress
from bytewright.generator import pipeline
from bytewright.generator import project as P

SCHEMA = """\
bytewright: 1
family: tiny
title: Tiny
endian: le
records:
  head:
    doc: A header.
    fields:
      - {name: magic, type: u16, const: 0x5754}
      - {name: size, type: u32}
"""


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_emission(monkeypatch) -> None:
    """Any call of the code emitter fails the test."""

    def render(family, problems=None):
        raise AssertionError(f"code emitted for {family.name}")

    monkeypatch.setattr(pipeline, "render", render)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A project of one tiny schema (nothing generated)."""
    root = tmp_path / "tiny"
    (root / "schemas").mkdir(parents=True)
    (root / "schemas" / "tiny.yaml").write_text(SCHEMA, encoding="utf-8")
    (root / "bytewright.toml").write_text('name = "tiny"\n', encoding="utf-8")
    return root


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   cwd=root, check=True, capture_output=True)


# -- doc, diff, export read layouts only ------------------------------------------------------

def test_doc_writes_layouts_without_emitting_code(tiny, tmp_path, capsys, no_emission):
    out = tmp_path / "site"
    code, _, err = run(["doc", "--project", str(tiny), "--out", str(out)], capsys)
    assert code == 0, err
    doc = json.loads((out / "layouts.json").read_text(encoding="utf-8"))
    (fam,) = doc["families"]
    assert fam["name"] == "tiny"
    assert {f["name"] for f in fam["records"][0]["layouts"][0]["fields"]} == {"magic", "size"}
    assert "\r" not in err  # stderr is not a terminal here: no progress line


def test_diff_old_new_without_emitting_code(tiny, tmp_path, capsys, no_emission):
    new = tmp_path / "new"
    new.mkdir()
    (new / "tiny.yaml").write_text(SCHEMA.replace("type: u32}", "type: u64}"))
    code, out, _ = run(["diff", str(tiny / "schemas"), str(new), "--format", "json"], capsys)
    assert code == 1  # a widened field is wire-breaking
    report = json.loads(out)
    assert any("size" in f["subject"] for f in report["findings"])


def test_diff_against_revision_without_emitting_code(tiny, capsys, monkeypatch, no_emission):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    _git(tiny, "init", "-q")
    _git(tiny, "add", ".")
    _git(tiny, "commit", "-q", "-m", "tiny")
    schema = tiny / "schemas" / "tiny.yaml"
    schema.write_text(SCHEMA.replace("doc: A header.", "doc: The header."))
    monkeypatch.chdir(tiny)
    code, out, _ = run(["diff", "--against", "HEAD", "--format", "json"], capsys)
    assert code == 0
    assert [f["category"] for f in json.loads(out)["findings"]] == ["DOC"]


def test_diff_code_still_shows_the_generated_code(tiny, tmp_path, capsys):
    new = tmp_path / "new"
    new.mkdir()
    (new / "tiny.yaml").write_text(SCHEMA.replace("type: u32}", "type: u64}"))
    code, out, _ = run(["diff", str(tiny / "schemas"), str(new), "--code"], capsys)
    assert code == 1
    assert "--- a/generated/tiny.py" in out and "+++ b/generated/tiny.py" in out


def test_export_ksy_without_emitting_code(tiny, tmp_path, capsys, no_emission):
    out = tmp_path / "ksy"
    code, _, err = run(["export", "ksy", "--project", str(tiny), "--out", str(out)], capsys)
    assert code == 0, err
    assert (out / "tiny.ksy").is_file()


# -- progress ---------------------------------------------------------------------------------

class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_on_a_terminal_and_erased():
    term = _Terminal()
    with Progress("check", term) as progress:
        progress("generating tiny.py")
        assert "check: generating tiny.py" in term.getvalue()
    assert term.getvalue().endswith("\r\x1b[K")  # the line is gone when the verb is done


def test_progress_is_silent_when_not_a_terminal():
    pipe = io.StringIO()
    with Progress("check", pipe) as progress:
        progress("generating tiny.py")
    assert pipe.getvalue() == ""


# -- init refuses names that cannot be a module -------------------------------------------------

@pytest.mark.parametrize(("name", "why"), [
    ("class", "keyword"), ("match", "soft keyword"), ("2fast", "identifier"),
    ("my-format", "identifier"), ("json", "standard library"), ("yaml", "installed"),
    ("bytewright", "installed")])
def test_init_refuses_a_family_name(name, why, tmp_path, capsys):
    target = tmp_path / "p"
    code, out, err = run(["init", str(target), "--family", name], capsys)
    assert code == 2 and out == ""
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert repr(name) in line and why in line
    assert not target.exists()


# -- outside any project ------------------------------------------------------------------------

@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch) -> Path:
    """A current folder with no project file in it or above."""
    if P.find(tmp_path) is not None:
        pytest.skip("a project file above the temporary folder")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("argv", [["generate"], ["generate", "-o", "out"],
                                  ["fixtures", "write", "--dry-run"],
                                  ["diff", "--against", "HEAD"]])
def test_outside_a_project_verbs_that_act_on_one_refuse(argv, nowhere, capsys):
    before = {p: p.stat().st_mtime_ns for p in (P.PACKAGE_ROOT / "generated").glob("*.py")}
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert "--project" in line
    assert {p: p.stat().st_mtime_ns for p in before} == before
    assert not (nowhere / "out").exists()


def test_outside_a_project_an_explicit_project_still_works(tiny, nowhere, capsys):
    code, out, err = run(["generate", "--project", str(tiny / "bytewright.toml")], capsys)
    assert code == 0, err
    assert (tiny / "generated" / "tiny.py").is_file()


def test_the_package_project_can_be_named_explicitly(nowhere):
    proj = P.resolve(P.PACKAGE_PROJECT_FILE, fallback=False)
    assert proj.is_package and proj.how == "from --project"
    with pytest.raises(P.NoProject, match="--project"):
        P.resolve(fallback=False)
    assert P.resolve().is_package  # read-only verbs still show the shipped formats
