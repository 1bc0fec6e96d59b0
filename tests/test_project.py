"""User projects: the project file, init -> generate -> check, plug-ins, fixture writing,
and the shipped formats described by the package's own project file."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from bytewright.cli.main import main
from bytewright.generator import pipeline
from bytewright.generator import project as P
from bytewright.review import checks

ENV = {**os.environ, "PYTHONPATH": str(P.PACKAGE_ROOT.parent)}


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def new_project(tmp_path: Path, capsys, family: str = "notes") -> Path:
    root = tmp_path / "proj"
    assert run(["init", str(root), "--family", family], capsys)[0] == 0
    return root


# -- the project file ---------------------------------------------------------------------

def test_defaults_are_relative_to_the_project_folder(tmp_path):
    proj = P.from_table({}, tmp_path, tmp_path / "bytewright.toml")
    assert proj.schemas == [tmp_path.resolve() / "schemas"]
    assert proj.output == tmp_path.resolve() / "generated"
    assert proj.fixtures == tmp_path.resolve() / "fixtures"
    assert proj.package is None and proj.plugins == [] and proj.cases is None
    assert proj.name == tmp_path.name


@pytest.mark.parametrize("text,needle", [
    ("schemas = 3", "schemas must be a string or a list of strings"),
    ("output = ''", "output must be a non-empty string"),
    ("colour = 'red'", "unknown key(s) colour"),
    ("plugins = ['no_colon']", "not of the form 'module:function'"),
    ("package = 'not a name'", "dotted Python name"),
    ("schemas = [", "not valid TOML"),
])
def test_bad_project_file_is_one_line_naming_the_file(tmp_path, text, needle):
    f = tmp_path / "bytewright.toml"
    f.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(P.ProjectError) as info:
        P.load(f)
    msg = str(info.value)
    assert needle in msg and str(f) in msg and "\n" not in msg
    assert not info.value.io


def test_unknown_tables_are_kept_for_their_owner(tmp_path):
    f = tmp_path / "bytewright.toml"
    f.write_text("[diff]\nallow = ['W004']\n", encoding="utf-8")
    assert P.load(f).sections == {"diff": {"allow": ["W004"]}}


def test_pyproject_table_and_search_upward(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n[tool.bytewright]\nschemas = ['formats']\n", encoding="utf-8")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    proj = P.resolve(cwd=deep)
    assert proj.file == (tmp_path / "pyproject.toml").resolve()
    assert proj.schemas == [(tmp_path / "formats").resolve()]
    assert "found from the current folder" in proj.describe()
    # a bytewright.toml nearer to the cwd wins
    (deep / "bytewright.toml").write_text("", encoding="utf-8")
    assert P.resolve(cwd=deep).file == (deep / "bytewright.toml").resolve()


def test_pyproject_without_our_table_is_not_a_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    with pytest.raises(P.ProjectError):
        P.load(tmp_path)
    assert P.find(tmp_path) is None or P.find(tmp_path).parent != tmp_path


def test_no_project_falls_back_to_the_package_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    proj = P.resolve()
    assert proj.is_package and "no bytewright.toml found" in proj.describe()
    code, out, _ = run(["fixtures", "list"], capsys)
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("project: ") and str(P.PACKAGE_PROJECT_FILE) in first
    assert "package's own" in first


def test_missing_project_path_is_an_io_error(tmp_path):
    with pytest.raises(P.ProjectError) as info:
        P.resolve(tmp_path / "nope.toml")
    assert info.value.io


# -- the package's own project ------------------------------------------------------------

def test_package_project_lists_the_shipped_folders():
    proj = P.package_project()
    assert proj.is_package
    before = list(sys.path)
    proj.activate()  # no plug-ins: the package root must not become a sys.path entry
    assert sys.path == before
    assert proj.schemas == [P.PACKAGE_ROOT / "schemas"]
    assert proj.output == P.PACKAGE_ROOT / "generated" == pipeline.GENERATED_DIR
    assert proj.fixtures == P.PACKAGE_ROOT / "fixtures" == checks.FIXTURE_DIR
    families = {yaml.safe_load(p.read_text())["family"] for p in proj.schema_files()}
    modules = {p.stem for p in proj.output.glob("*.py") if p.stem != "__init__"}
    assert families == modules
    fixture_families = {p.parent.name for p in checks.fixture_paths(None, proj.fixtures)}
    assert fixture_families <= families


PLUMBING = ["generator/project.py", "generator/pipeline.py", "review/checks.py",
            "cli/main.py", "cli/common.py", "cli/generate.py", "cli/check.py", "cli/init.py",
            "cli/fixtures.py", "cli/doc.py", "cli/diff.py", "cli/inspect.py",
            "tests/cases/write.py"]


def test_no_code_path_knows_the_shipped_family_names():
    """The shipped formats reach the verbs only through bytewright.toml."""
    names = {yaml.safe_load(p.read_text())["family"]
             for p in P.package_project().schema_files()}
    pattern = re.compile(r"\b(" + "|".join(sorted(names)) + r")\b", re.IGNORECASE)
    leaks = {}
    for rel in PLUMBING:
        text = (P.PACKAGE_ROOT / rel).read_text(encoding="utf-8")
        found = sorted({m.group(0) for m in pattern.finditer(text)})
        if found:
            leaks[rel] = found
    assert leaks == {}


def test_package_fixture_cases_match_the_fixture_bytes(capsys):
    """`fixtures write` over the package's own project changes no fixture bytes."""
    code, out, err = run(["fixtures", "write", "--project", str(P.PACKAGE_PROJECT_FILE),
                          "--dry-run"], capsys)
    assert code == 0, err
    assert "0 bytes changed" in out and "BYTES CHANGE" not in err


# -- a user project end to end --------------------------------------------------------------

def test_init_generate_check_as_real_processes(tmp_path):
    bw = [sys.executable, "-m", "bytewright"]
    for argv in (["init"], ["generate"], ["check"]):
        p = subprocess.run([*bw, *argv], cwd=tmp_path, env=ENV, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, (argv, p.stdout, p.stderr)
    assert p.stdout.splitlines()[0] == (f"project: {(tmp_path / 'bytewright.toml').resolve()} "
                                        "(found from the current folder)")
    assert "1 passed, 0 failed" in p.stdout
    assert (tmp_path / "generated" / "notes.py").is_file()


def test_user_family_named_like_a_stdlib_module(tmp_path, capsys):
    """A family called ``json`` is loaded from its file under a private name: it neither
    shadows nor is shadowed by the standard library. (``init`` refuses such a name, so
    the project is written by hand here.)"""
    from bytewright.cli import init as init_cmd

    root = tmp_path / "proj"
    for rel, text in init_cmd.files_for("proj", "json").items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    code, out, _ = run(["check", "--project", str(root)], capsys)
    assert code == 0 and "1 passed, 0 failed" in out
    mod = P.load(root).load_module("json")
    assert mod.__name__ != "json" and hasattr(mod, "decode_notes_file")
    import json
    assert json.dumps([1]) == "[1]"
    code, out, _ = run(["inspect", "json", "auto", str(root / "fixtures/json/two_notes.hex"),
                        "--project", str(root), "--json"], capsys)
    assert code == 0 and '"text": "write my own format"' in out


def test_generated_user_module_imports_only_the_public_runtime(tmp_path, capsys):
    root = new_project(tmp_path, capsys)
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    tree = ast.parse((root / "generated" / "notes.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    ours = {m for m in imported if m.split(".")[0] == "bytewright"}
    assert ours and all(m.startswith("bytewright.runtime") for m in ours), ours


def test_generate_schema_to_out_without_a_project(tmp_path, monkeypatch, capsys):
    from bytewright.cli import init as init_cmd
    (tmp_path / "png.yaml").write_text(init_cmd.SCHEMA.format(family="png"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["generate", "png.yaml", "-o", "out/"], capsys)
    assert code == 0
    assert out.splitlines()[0].startswith("project: ") and "no project file" in out
    assert (tmp_path / "out" / "png.py").is_file()
    assert not (tmp_path / "bytewright.toml").exists()
    code, _, err = run(["generate", "png.yaml"], capsys)
    assert code == 2 and "-o OUT" in err


def test_check_finds_drift_and_stray_fixture_folders(tmp_path, capsys):
    root = new_project(tmp_path, capsys)
    code, _, err = run(["check", "--project", str(root)], capsys)
    assert code == 1 and "DRIFT generated/notes.py: not generated yet" in err
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    gen = root / "generated" / "notes.py"
    gen.write_text(gen.read_text().replace("def _d_note(", "def _d_note_x(", 1))
    code, _, err = run(["check", "--project", str(root)], capsys)
    assert code == 1 and "DRIFT generated/notes.py" in err
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    stray = root / "fixtures" / "nofamily"
    stray.mkdir()
    (stray / "x.hex").write_text("#: record: r\n00\n")
    code, out, err = run(["check", "--project", str(root)], capsys)
    assert code == 1 and "'nofamily' is not a family" in out
    assert err.count("\n") == 1 and "1 fixture(s) failed: nofamily" in err


def test_plugin_checksum_from_the_project_file(tmp_path, capsys, monkeypatch):
    """A checksum named only by a plug-in module next to the project file: the project
    folder goes on sys.path and the plug-in is loaded before the schema is validated."""
    root = new_project(tmp_path, capsys)
    mod = f"sum16_{uuid.uuid4().hex[:8]}"
    (root / f"{mod}.py").write_text(
        "def register(reg):\n"
        "    reg.add_checksum('sum16_test', bits=16,\n"
        "                     func=lambda data, seed=0: (seed + sum(data)) & 0xFFFF)\n")
    toml = root / "bytewright.toml"
    toml.write_text(toml.read_text().replace("plugins = []", f'plugins = ["{mod}:register"]'))
    schema = root / "schemas" / "notes.yaml"
    schema.write_text(schema.read_text().replace(
        "{name: crc, type: u32, checksum: {algorithm: crc32,",
        "{name: crc, type: u16, checksum: {algorithm: sum16_test,"))
    monkeypatch.chdir(tmp_path)  # not the project folder: --project must be enough
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    code, out, err = run(["fixtures", "write", "--project", str(root)], capsys)
    assert code == 1 and "two_notes.hex" in out  # the CRC became a sum16: bytes change
    assert err.startswith("bytewright fixtures write: refused")
    assert run(["fixtures", "write", "--project", str(root), "--bless"], capsys)[0] == 0
    code, out, err = run(["check", "--project", str(root)], capsys)
    assert code == 0, err
    assert "1 passed, 0 failed" in out
    data = checks.parse_fixture(root / "fixtures" / "notes" / "two_notes.hex").data
    assert len(data) == 47  # two u16 sums instead of two u32 CRCs


def test_fixture_writing_refuses_changed_bytes_without_bless(tmp_path, capsys):
    root = new_project(tmp_path, capsys)
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    fx = root / "fixtures" / "notes" / "two_notes.hex"
    original = fx.read_bytes()
    cases = root / "cases" / "notes_cases.py"
    text = cases.read_text()
    # a doc-only change rewrites the comment; a new case is written without --bless
    cases.write_text(text.replace("(made by bytewright init)", "(edited)").replace(
        '            "Two notes', '            "Two notes'))
    code, out, _ = run(["fixtures", "write", "--project", str(root)], capsys)
    assert code == 0 and "comments/params only" in out and "(edited)" in fx.read_text()
    original = fx.read_bytes()
    # changed bytes: refused, listed, nothing written
    cases.write_text(cases.read_text().replace("hello, world", "hello, World"))
    code, out, err = run(["fixtures", "write", "--project", str(root)], capsys)
    assert code == 1
    assert "BYTES CHANGE fixtures/notes/two_notes.hex" in out and "--bless" in err
    assert fx.read_bytes() == original
    code, _, err = run(["fixtures", "write", "--project", str(root), "--dry-run"], capsys)
    assert code == 1 and fx.read_bytes() == original
    code, out, _ = run(["fixtures", "write", "--project", str(root), "--bless"], capsys)
    assert code == 0 and fx.read_bytes() != original
    assert checks.parse_fixture(fx).data[9:21] == b"hello, World"
    assert run(["check", "--project", str(root)], capsys)[0] == 0
    code, _, err = run(["fixtures", "write", "--project", str(root), "--family", "x"], capsys)
    assert code == 2 and "no family 'x'" in err


def test_write_py_is_the_fixtures_verb(capsys):
    import importlib.util
    path = P.PACKAGE_ROOT / "tests" / "cases" / "write.py"
    spec = importlib.util.spec_from_file_location("_write_py", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.run(["--dry-run", "--family", "no_such_family"]) == 2
    assert "no family 'no_such_family'" in capsys.readouterr().err


def test_output_as_an_importable_package(tmp_path, capsys):
    """``package = "..."``: modules go to the package's folder and import as
    ``package.family`` (the project folder goes on sys.path)."""
    root = new_project(tmp_path, capsys)
    pkg = f"codecs_{uuid.uuid4().hex[:8]}"
    toml = root / "bytewright.toml"
    toml.write_text(toml.read_text().replace('output = "generated"', f'package = "{pkg}"'))
    proj = P.load(root)
    assert proj.output == (root / pkg).resolve() and proj.package == pkg
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    assert (root / pkg / "__init__.py").is_file() and (root / pkg / "notes.py").is_file()
    code, out, _ = run(["check", "--project", str(root)], capsys)
    assert code == 0 and "1 passed, 0 failed" in out
    assert P.load(root).load_module("notes").__name__ == f"{pkg}.notes"
