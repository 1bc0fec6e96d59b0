"""``bytewright init [DIR]``: scaffold a working user project.

Writes a project file, one small example schema, its fixture cases and one golden
fixture, and a README line. Right after it, ``bytewright generate && bytewright check``
pass in DIR. Nothing is ever overwritten: if a file it would write exists, it refuses.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import keyword
import re
import sys
from pathlib import Path

from ..generator import project as project_mod
from . import common

_FAMILY = re.compile(r"^[a-z_][a-z0-9_]*$")

PROJECT_TOML = """\
# bytewright project file: see docs/project-file.md in bytewright.
name = "{name}"
schemas = ["schemas"]        # schema files or folders (every *.yaml in a folder)
output = "generated"         # where `bytewright generate` writes <family>.py
fixtures = "fixtures"        # golden bytes: fixtures/<family>/*.hex, run by `bytewright check`
cases = "cases"              # <family>_cases.py: field values `bytewright fixtures write` encodes
plugins = []                 # "module:function" plug-ins (checksums, codecs, conversions)
"""

SCHEMA = """\
# An example format made by `bytewright init`: edit it, or replace it with your own.
# Language reference: docs/schema-language.md in bytewright.
bytewright: 1
family: {family}
title: Notes log (example)
doc: >
  A 6-byte file header, then notes to the end of the file. Each note has a kind, a
  length-prefixed UTF-8 text and a CRC-32 over the note's preceding bytes.
endian: le
detect: [{{record: notes_file, magic: "hex:4e4f5445"}}]  # how `inspect`/`verify` know a file

enums:
  note_kind:
    type: u8
    doc: What a note is.
    values:
      TEXT: {{value: 1, doc: free text}}
      TODO: {{value: 2, doc: something to do}}

records:
  notes_file:
    doc: A whole notes file.
    fields:
      - {{name: magic, type: bytes, size: 4, const: "4e4f5445", doc: "b'NOTE'"}}
      - {{name: version, type: u16, valid: {{min: 1, max: 1}}, doc: "format version; 1"}}
      - {{name: notes, type: note, repeat: eos}}
  note:
    doc: One note, protected by its CRC-32.
    fields:
      - {{name: kind, type: note_kind}}
      - {{name: text, type: str, length: u16, encoding: utf-8}}
      - {{name: crc, type: u32, checksum: {{algorithm: crc32, covers: preceding}}}}
"""

CASES = '''\
"""Field values of the {family} fixtures: `bytewright fixtures write` encodes each one
into fixtures/{family}/<name>.hex (and refuses if an existing fixture's bytes would change).
"""


def cases(codec):
    """(name, record, params, value, doc) per fixture; ``codec`` is the generated module."""
    notes = [codec.Note(kind=codec.NoteKind.TEXT, text="hello, world"),
             codec.Note(kind=codec.NoteKind.TODO, text="write my own format")]
    yield ("two_notes", "notes_file", {{}}, codec.NotesFile(version=1, notes=notes),
           "Two notes: a TEXT and a TODO (made by bytewright init).")
'''

# The bytes the cases above encode to (kept literal: a fixture is the byte authority).
FIXTURE = """\
# Two notes: a TEXT and a TODO (made by bytewright init).
#: record: notes_file
#: params: {}
4e4f5445 0100010c 0068656c 6c6f2c20 776f726c 6477fda3 c0021300 77726974
65206d79 206f776e 20666f72 6d61743e b53c4a
"""

README = """\
# {name}

A binary format described with bytewright (installed from a clone of its repository):
`bytewright generate` writes the codec into `generated/`, `bytewright check` runs the
golden fixtures, `bytewright doc` writes its documentation.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="scaffold a new project (project file, schema, fixture)",
                       description="Create a bytewright project in DIR (default: the current "
                                   "folder): bytewright.toml, schemas/FAMILY.yaml, "
                                   "cases/FAMILY_cases.py, fixtures/FAMILY/two_notes.hex and "
                                   "README.md. Never overwrites a file.")
    p.add_argument("dir", nargs="?", type=Path, default=Path("."), metavar="DIR")
    p.add_argument("--family", default="notes",
                   help="family name of the example schema (default: notes)")
    p.set_defaults(func=run)


def files_for(name: str, family: str) -> dict[str, str]:
    return {
        project_mod.PROJECT_FILE: PROJECT_TOML.format(name=name.replace('"', "")),
        f"schemas/{family}.yaml": SCHEMA.format(family=family),
        f"cases/{family}_cases.py": CASES.format(family=family),
        f"fixtures/{family}/two_notes.hex": FIXTURE,
        "README.md": README.format(name=name),
    }


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a family (a Python module name), or None when it can."""
    if not name.isidentifier():
        return "not a Python identifier"
    if keyword.iskeyword(name):
        return "a Python keyword"
    if keyword.issoftkeyword(name):
        return "a Python soft keyword"
    if not _FAMILY.match(name):
        return "use lower-case letters, digits and _"
    if name in sys.stdlib_module_names:
        return "shadows the standard library module of that name"
    if name in _installed_top_level():
        return "collides with the installed package of that name"
    return None


def _installed_top_level() -> set[str]:
    """Top-level import names of the installed distributions (and bytewright itself)."""
    names = {"bytewright"}
    try:
        names.update(importlib.metadata.packages_distributions())
    except Exception:  # noqa: BLE001 - broken metadata must not stop init; nothing to add
        pass
    return names


def run(args: argparse.Namespace) -> int:
    family = args.family
    why = name_problem(family)
    if why is not None:
        raise common.UsageError(f"--family {family!r}: {why} (the family name becomes a "
                                "Python module name)")
    target: Path = args.dir
    if target.exists() and not target.is_dir():
        raise common.InputError(f"{target}: exists and is not a folder")
    name = target.resolve().name or "project"
    files = files_for(name, family)
    if (target / project_mod.PYPROJECT_FILE).is_file():
        try:
            if project_mod.load(target / project_mod.PYPROJECT_FILE):
                raise common.UsageError(f"{target}: already a project (pyproject.toml has "
                                        "[tool.bytewright])")
        except project_mod.ProjectError:
            pass  # a pyproject.toml without our table: a bytewright.toml goes beside it
    existing = [rel for rel in files if rel != "README.md" and (target / rel).exists()]
    if existing:
        raise common.UsageError(f"{target}: would overwrite {', '.join(existing)}; init only "
                                "writes into a new project folder")
    written = []
    try:
        for rel, text in files.items():
            path = target / rel
            if rel == "README.md" and path.exists():
                continue  # the user's own README stays as it is
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "x", encoding="utf-8") as fh:  # "x": never overwrite
                fh.write(text)
            written.append(rel)
    except OSError as exc:
        raise common.InputError(common.io_message(exc.filename or target, exc)) from exc
    print(f"created a bytewright project in {target.resolve()}:")
    for rel in written:
        print(f"  {rel}")
    where = "" if target.resolve() == Path.cwd().resolve() else f"cd {target} && "
    print(f"next: {where}bytewright generate && bytewright check")
    return 0
