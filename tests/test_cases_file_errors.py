"""A mistake in a project's cases file is the user's: one line on stderr naming the file and
the field, exit 2 (usage), never "internal error" (README: exit codes shared by every verb)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bytewright.cli.main import main

GOOD = '''def cases(codec):
    notes = [codec.Note(kind=codec.NoteKind.TEXT, text="hello")]
    yield ("one_note", "notes_file", {}, codec.NotesFile(version=1, notes=notes), "one")
'''


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """An init'ed project with its module generated (made once: generating takes a second)."""
    root = tmp_path_factory.mktemp("cases") / "proj"
    assert main(["init", str(root)]) == 0
    assert main(["generate", "--project", str(root)]) == 0
    return root


def write_cases(generated: Path, tmp_path: Path, text: str) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(generated, root)
    (root / "cases" / "notes_cases.py").write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("old, new, names", [
    ('text="hello"', 'txt="hello"', ["notes_cases.py:2", "txt"]),            # misspelt field
    ('kind=codec.NoteKind.TEXT, text="hello"', 'kind=codec.NoteKind.TEXT',
     ["notes_cases.py:2", "text"]),                                          # a field left out
    ('text="hello"', 'text=5', ["notes_cases.py", "one_note", "text"]),      # a wrong value
    ('codec.NoteKind.TEXT', 'codec.NoteKnd.TEXT', ["notes_cases.py:2", "NoteKnd"]),
    ('notes = [', 'notes = [[', ["notes_cases.py:2", "was never closed"]),
    ('"notes_file", {}', '"notes_file", {"x": 1}', ["notes_cases.py", "one_note", "'x'"]),
    (', "one")', ')', ["notes_cases.py", "(name, record, params, value, doc)"]),
    ('def cases', 'def case', ["notes_cases.py", "cases()"]),
])
def test_a_mistake_in_the_cases_file_is_one_usage_line(generated, tmp_path, capsys, old, new,
                                                      names):
    assert old in GOOD
    root = write_cases(generated, tmp_path, GOOD.replace(old, new))
    code = main(["fixtures", "write", "--project", str(root)])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert "internal error" not in err and "Traceback" not in err
    for word in names:
        assert word in lines[0], (word, lines[0])


def test_the_good_cases_file_writes(generated, tmp_path, capsys):
    root = write_cases(generated, tmp_path, GOOD)
    assert main(["fixtures", "write", "--project", str(root)]) == 0, capsys.readouterr().err
    assert (root / "fixtures" / "notes" / "one_note.hex").is_file()
