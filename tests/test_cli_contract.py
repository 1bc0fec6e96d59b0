"""The CLI contract: every verb fails in one line with a shared exit code.

0 ok, 1 findings / corrupt data, 2 usage, 3 I/O, 4 internal error (a bug). Most cases run
in-process through ``main()``; a few run as real processes (closed pipe, ``python -m``,
stdin, tracebacks only with ``--debug``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bytewright.cli import common
from bytewright.cli import init as init_cmd
from bytewright.cli.main import build_parser, main
from bytewright.generator.project import PACKAGE_ROOT
from bytewright.review import checks

BW = [sys.executable, "-m", "bytewright"]
ENV = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT.parent)}
MINE = {"generate", "check", "doc", "diff", "inspect", "bench", "init", "fixtures"}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


def _biggest_fixture(family: str) -> Path | None:
    paths = checks.fixture_paths(family)
    return max(paths, key=lambda p: p.stat().st_size) if paths else None


def _inputs(tmp_path: Path, family: str = "htt") -> dict[str, Path]:
    """The five bad inputs: missing path, a folder, an empty file, random bytes, and the
    first half of a real fixture of ``family``."""
    fx = _biggest_fixture(family) or _biggest_fixture("htt")
    data = checks.parse_fixture(fx).data
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "random").write_bytes(bytes(range(256)) * 3 + os.urandom(1000))
    (tmp_path / "truncated").write_bytes(data[: len(data) // 2])
    return {"missing": tmp_path / "missing", "folder": tmp_path / "folder",
            "empty": tmp_path / "empty", "random": tmp_path / "random",
            "truncated": tmp_path / "truncated"}


# -- the generic verbs (exact exit codes) ---------------------------------------------

INSPECT_EXPECT = {"missing": 3, "folder": 3, "empty": 1, "random": 1, "truncated": 1}


@pytest.mark.parametrize("kind", sorted(INSPECT_EXPECT))
def test_inspect_bad_inputs(kind, tmp_path, capsys):
    path = _inputs(tmp_path)[kind]
    code, _, err = run(["inspect", "htt", "htt_file", str(path)], capsys)
    assert code == INSPECT_EXPECT[kind]
    line = one_line_error(err)
    assert str(path) in line


@pytest.mark.parametrize("kind", ["empty", "random", "truncated"])
def test_inspect_bad_hex_files(kind, tmp_path, capsys):
    src = _inputs(tmp_path)[kind]
    hexfile = tmp_path / f"{kind}.hex"
    hexfile.write_bytes(src.read_bytes())
    code, _, err = run(["inspect", "htt", "auto", str(hexfile)], capsys)
    assert code == 1
    assert "not a hex fixture" in one_line_error(err)


@pytest.mark.parametrize("mutation", [
    lambda t: t.replace("#: params: {}", "#: params: {not json"),
    lambda t: t.replace("#: params: {}", "#: params: [1, 2]"),
    lambda t: t + "zz\n",
    lambda t: t + "abc\n",
    lambda t: t.replace("#: record:", "#: recrod:"),
], ids=["params-not-json", "params-not-object", "not-hex", "odd-digits", "no-record"])
def test_inspect_mutated_hex_fixture(mutation, tmp_path, capsys):
    """A mutated ``.hex`` is one line and exit 1, never a ValueError traceback."""
    text = (checks.FIXTURE_DIR / "htt" / "01_empty.hex").read_text(encoding="utf-8")
    bad = tmp_path / "m.hex"
    bad.write_text(mutation(text), encoding="utf-8")
    code, _, err = run(["inspect", "htt", "auto", str(bad)], capsys)
    assert code == 1
    assert str(bad) in one_line_error(err)


@pytest.mark.parametrize("argv,needle", [
    (["--params", "{nope"], "not JSON"),
    (["--params", "[1]"], "JSON object"),
    (["--params", '{"bogus": 1}'], "bogus"),
    (["--params", '{"semantic_dims": "x", "tail_layout": 0}'], "do not fit"),
    (["--params", '{"semantic_dims": 1.5, "tail_layout": 0}'], "semantic_dims"),
    (["--offset", "-1"], "negative"),
    (["--offset", "x"], "not an integer"),
    (["--offset", "100000"], "past the end"),
])
def test_inspect_bad_arguments_are_usage_errors(argv, needle, capsys):
    fx = str(checks.FIXTURE_DIR / "htt" / "wal_entry_insert_1.hex")
    code, _, err = run(["inspect", "htt", "wal_entry", fx, *argv], capsys)
    assert code == 2
    assert needle in one_line_error(err)


def test_inspect_unknown_family_and_missing_arguments(capsys):
    fx = str(checks.FIXTURE_DIR / "htt" / "01_empty.hex")
    code, _, err = run(["inspect", "no_such_family", "auto", fx], capsys)
    assert code == 2 and "no generated family" in one_line_error(err)
    code, _, err = run(["inspect"], capsys)
    assert code == 2 and "required" in one_line_error(err)


def test_inspect_reads_stdin(monkeypatch, capsys):
    import io
    data = checks.parse_fixture(checks.FIXTURE_DIR / "htt" / "01_empty.hex").data
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, err = run(["inspect", "htt", "htt_file", "-", "--json"], capsys)
    assert code == 0, err
    assert f'"size": {len(data)}' in out


DOC_EXPECT = {"missing": 3, "folder": 3, "empty": 2, "random": 2, "truncated": 2}


@pytest.mark.parametrize("kind", sorted(DOC_EXPECT))
def test_doc_bad_schema_inputs(kind, tmp_path, capsys):
    path = _inputs(tmp_path)[kind]
    code, _, err = run(["doc", str(path), "--out", str(tmp_path / "site")], capsys)
    assert code == DOC_EXPECT[kind]
    assert str(path) in one_line_error(err)
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("kind", sorted(DOC_EXPECT))
def test_diff_bad_schema_inputs(kind, tmp_path, capsys):
    path = _inputs(tmp_path)[kind]
    good = tmp_path / "good.yaml"  # a small valid schema, so the test stays fast
    good.write_text(init_cmd.SCHEMA.format(family="notes"), encoding="utf-8")
    for argv in (["diff", str(good), str(path)], ["diff", str(path), str(good)]):
        code, _, err = run(argv, capsys)
        assert code == DOC_EXPECT[kind]
        assert str(path) in one_line_error(err)


def test_diff_yaml_mapping_as_key_is_one_line(tmp_path, capsys):
    bad = tmp_path / "k.yaml"
    bad.write_text("? {a: 1}\n: 2\n", encoding="utf-8")
    code, _, err = run(["diff", str(bad), str(bad)], capsys)
    assert code == 2
    assert "unsupported structure" in one_line_error(err)


def test_diff_usage_errors(capsys):
    code, _, err = run(["diff", "--family", "x", "a", "b"], capsys)
    assert code == 2 and "--versions" in one_line_error(err)
    code, _, err = run(["diff", "-", "-"], capsys)
    assert code == 2 and "standard input" in one_line_error(err)
    code, _, err = run(["diff", "only_one"], capsys)
    assert code == 2 and one_line_error(err)


GEN_EXPECT = {"missing": 3, "folder": 3, "empty": 2, "random": 2, "truncated": 2}


@pytest.mark.parametrize("kind", sorted(GEN_EXPECT))
def test_generate_bad_schema_inputs(kind, tmp_path, capsys):
    path = _inputs(tmp_path)[kind]
    code, _, err = run(["generate", str(path), "-o", str(tmp_path / "out")], capsys)
    assert code == GEN_EXPECT[kind]
    assert "Traceback" not in err and err.strip()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


PROJECT_EXPECT = {"missing": 3, "folder": 3, "empty": 2, "random": 2, "truncated": 2}


@pytest.mark.parametrize("verb", [["check"], ["generate"], ["doc"], ["fixtures", "write"],
                                  ["fixtures", "list"], ["inspect", "x", "auto", "f.hex"],
                                  ["diff", "--versions", "r"]])
@pytest.mark.parametrize("kind", sorted(PROJECT_EXPECT))
def test_every_project_verb_with_a_bad_project_file(verb, kind, tmp_path, capsys):
    path = _inputs(tmp_path)[kind]
    code, _, err = run([*verb, "--project", str(path)], capsys)
    line = one_line_error(err)
    if kind == "empty":  # valid TOML: a project of defaults, whose schemas/ is missing
        assert code in (2, 3)
        return
    assert code == PROJECT_EXPECT[kind]
    assert str(path) in line


def test_check_unknown_family_is_usage_error(tmp_path, capsys):
    assert run(["init", str(tmp_path)], capsys)[0] == 0
    assert run(["generate", "--project", str(tmp_path)], capsys)[0] == 0
    code, _, err = run(["check", "--project", str(tmp_path), "--family", "no_such"], capsys)
    assert code == 2
    line = one_line_error(err)
    assert "no_such" in line and "families: notes" in line
    code, out, err = run(["check", "--project", str(tmp_path), "--family", "notes"], capsys)
    assert code == 0 and "1 passed, 0 failed" in out


@pytest.mark.parametrize("argv", [["bench", "--entries", "0"], ["bench", "--entries", "-5"],
                                  ["bench", "--ze-records", "0"], ["bench", "--entries", "x"]])
def test_bench_bad_counts_are_usage_errors(argv, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2
    assert "--" in one_line_error(err)


def test_init_refuses_to_overwrite(tmp_path, capsys):
    assert run(["init", str(tmp_path)], capsys)[0] == 0
    before = (tmp_path / "bytewright.toml").read_bytes()
    code, _, err = run(["init", str(tmp_path)], capsys)
    assert code == 2 and "would overwrite" in one_line_error(err)
    assert (tmp_path / "bytewright.toml").read_bytes() == before
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, _, err = run(["init", str(afile)], capsys)
    assert code == 3 and "not a folder" in one_line_error(err)
    code, _, err = run(["init", str(tmp_path / "new"), "--family", "Bad-Name"], capsys)
    assert code == 2 and "--family" in one_line_error(err)


def test_unknown_verb_and_option(capsys):
    code, _, err = run(["no-such-verb"], capsys)
    assert code == 2 and "invalid choice" in one_line_error(err)
    code, _, err = run(["check", "--no-such-option"], capsys)
    assert code == 2 and "unrecognized" in one_line_error(err)


# -- format verbs (owned per format; held to the same floor) ----------------------------

def _file_verbs() -> dict[tuple[str, ...], list[tuple[str, str | None]]]:
    """Every sub-verb of a format verb that reads a FILE, found from the parser itself, so
    a new format's verbs are covered without editing this test; with the other arguments
    it requires (option or positional name), each filled with a fresh path."""
    found = {}

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, sp in subs[0].choices.items():
                walk(sp, (*path, name))
            return
        positional = [a for a in p._actions if not a.option_strings]
        if path[0] in MINE or [a.dest for a in positional[:1]] != ["file"]:
            return
        extra: list[tuple[str, str | None]] = []
        for a in p._actions:
            if a.option_strings and a.required:
                extra.append((a.dest, a.option_strings[-1]))
            elif not a.option_strings and a.dest != "file" and a.nargs not in ("?", "*"):
                # a positional with choices (a sub-action's name) takes its first choice
                extra.append((a.dest, None) if not a.choices else (a.dest, list(a.choices)[0]))
        found[path] = extra

    walk(build_parser(), ())
    return dict(sorted(found.items()))


FILE_VERBS = _file_verbs()


def test_format_verbs_found():
    assert len(FILE_VERBS) >= 3


@pytest.mark.parametrize("verb", list(FILE_VERBS), ids=lambda v: "-".join(v))
def test_format_verb_bad_inputs(verb, tmp_path, capsys):
    """The floor for every format verb: no traceback, a shared exit code, one line on stderr
    naming a path that cannot be read (exit 3), and a failing verb leaves the file as it
    was. (An empty or truncated file may be valid for some formats, so only random bytes
    must fail.)"""
    inputs = _inputs(tmp_path, verb[0])
    for kind, path in inputs.items():
        extra: list[str] = []
        for dest, opt in FILE_VERBS[verb]:
            target = str(tmp_path / f"{kind}-{dest}-out")
            if opt and not opt.startswith("-"):
                extra.append(opt)  # a choice, not an option
                continue
            extra += [opt, target] if opt else [target]
        before = path.read_bytes() if path.is_file() else None
        code, out, err = run([*verb, str(path), *extra], capsys)
        assert "Traceback" not in err, (kind, err)
        assert code in (0, 1, 2, 3), (kind, code, err)
        if kind in ("missing", "folder"):
            assert code == 3, (kind, code, out, err)
            assert str(path) in one_line_error(err), (kind, err)
        if kind == "random" and not FILE_VERBS[verb]:
            # (a salvage into an output may succeed with nothing kept: that is its report)
            assert code != 0, (kind, out, err)
        if before is not None and code != 0:
            assert path.read_bytes() == before, f"{kind}: a failing verb changed the file"


# -- real processes ---------------------------------------------------------------------

def proc(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*BW, *args], capture_output=True, env=ENV, timeout=120, **kw)


def test_version_and_python_dash_m():
    import bytewright
    p = proc(["--version"])
    assert p.returncode == 0 and p.stdout.decode().strip() == f"bytewright {bytewright.__version__}"
    p = proc(["--help"])
    assert p.returncode == 0 and b"exit codes" in p.stdout


def test_missing_path_as_a_process_is_one_line_exit_3(tmp_path):
    p = proc(["inspect", "htt", "htt_file", str(tmp_path / "nope")])
    assert p.returncode == 3
    assert p.stderr.decode().strip() == f"{tmp_path / 'nope'}: no such file or folder" or \
        p.stderr.decode().count("\n") == 1
    assert b"Traceback" not in p.stderr


def test_traceback_only_with_debug(tmp_path):
    bad = tmp_path / "b.hex"
    bad.write_text("#: record: htt_file\nzz\n")
    p = proc(["inspect", "htt", "auto", str(bad)])
    assert p.returncode == 1 and b"Traceback" not in p.stderr
    # An internal error keeps its traceback with --debug (here: a KeyError-free path,
    # so force one through a project whose plug-in raises).
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "bytewright.toml").write_text('plugins = ["boom:register"]\n')
    (proj / "boom.py").write_text("def register(reg):\n    raise RuntimeError('kaboom')\n")
    p = proc(["check", "--project", str(proj)])
    assert p.returncode == 2 and b"kaboom" in p.stderr and b"Traceback" not in p.stderr
    assert len(p.stderr.decode().strip().splitlines()) == 1
    p = proc(["check", "--project", str(proj), "--debug"])
    assert p.returncode != 0 and b"Traceback" in p.stderr


def test_closed_pipe_is_quiet():
    fx = str(checks.FIXTURE_DIR / "htt" / "02_structural_only.hex")
    cmd = " ".join([*(f"'{a}'" for a in BW), "inspect", "htt", "auto", f"'{fx}'",
                    "| head -c 10 >/dev/null"])
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=ENV,
                       timeout=120)
    assert b"Traceback" not in p.stderr and b"BrokenPipe" not in p.stderr, p.stderr
    assert p.returncode in (0, common.EXIT_PIPE)


def test_stdin_dash_for_doc(tmp_path):
    schema = init_cmd.SCHEMA.format(family="notes").encode()
    p = proc(["doc", "-", "--out", str(tmp_path / "site")], input=schema)
    assert p.returncode == 0, p.stderr
    assert "notes_file" in (tmp_path / "site" / "notes.md").read_text(encoding="utf-8")


def test_generate_reads_a_schema_from_stdin(tmp_path, monkeypatch, capsys):
    import io
    schema = init_cmd.SCHEMA.format(family="notes").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(schema)))
    code, out, err = run(["generate", "-", "-o", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert "def decode_notes_file(" in (tmp_path / "out" / "notes.py").read_text()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe")))
    code, _, err = run(["generate", "-", "-o", str(tmp_path / "out2")], capsys)
    assert code == 1 and "not UTF-8" in one_line_error(err)
