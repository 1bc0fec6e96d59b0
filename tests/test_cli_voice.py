"""One voice on the command line (docs/cli.md): every verb and sub-verb that reads a file,
found from the parser itself, fails on the same events with the same exit code and one
line on stderr, ``bytewright VERB: FILE[:OFFSET]: message``.

The events and their codes are the table of docs/cli.md: a missing path and an empty
folder are input errors (3); an empty file and random bytes are findings (1) for a data
verb and a schema problem (2) for a schema verb; a Pile has no header, so an empty file is
an empty pile (0).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bytewright.cli import common
from bytewright.cli.main import build_parser, main
from bytewright.generator.project import PACKAGE_ROOT
from bytewright.review import checks

LINE = re.compile(r"^bytewright [a-z -]+: ")
LEAK = re.compile(r"Traceback|\b[A-Z][a-zA-Z]*(Error|Exception)\b|expected None|codec can't")
FILE_DESTS = {"file", "paths", "target", "schemas", "old"}  # positionals naming an input
SCHEMA_DESTS = {"schemas", "old"}  # verbs whose input is a schema: bad content is usage (2)
EMPTY_IS_VALID = {"pile"}  # formats without a header: an empty file is an empty store
EVENTS = ("missing", "folder", "empty", "random")
INPUTS_RANDOM = bytes(random.Random(1234).getrandbits(8) for _ in range(4096))


def _readers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every leaf of the parser tree with a positional naming an input file."""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, child in subs[0].choices.items():
                walk(child, (*words, name))
            return
        dests = {a.dest for a in p._actions if not a.option_strings and not a.choices}
        if dests & FILE_DESTS:
            found[words] = p
    walk(build_parser(), ())
    return dict(sorted(found.items()))


READERS = _readers()


def _argv(words: tuple[str, ...], p: argparse.ArgumentParser, path: str, out: Path) -> list[str]:
    """``words`` and the arguments the verb requires: the input path where a file is read,
    a fresh path for an output, the first choice of a choice, 0 for a number."""
    argv = list(words)
    for a in p._actions:
        if a.option_strings:
            if a.required:
                argv += [a.option_strings[-1], str(out / a.dest)]
            continue
        if a.choices:  # the last choice: for ``export`` a table target, which reads FILE
            argv.append(list(a.choices)[-1])
        elif a.dest in FILE_DESTS or a.dest == "new":  # diff OLD NEW: both sides bad
            argv.append(path)
        elif a.nargs in ("?", "*"):
            continue
        elif a.type not in (None, str, Path):
            argv.append("0")
        else:
            argv.append(str(out / a.dest))
    if "--out" in {o for a in p._actions for o in a.option_strings}:
        argv += ["--out", str(out / "site")]
    if "-o" in {o for a in p._actions for o in a.option_strings}:
        argv += ["-o", str(out / "gen")]
    return argv


def _expected(words: tuple[str, ...], p: argparse.ArgumentParser, event: str) -> int:
    if event in ("missing", "folder"):
        return common.EXIT_IO
    if {a.dest for a in p._actions if not a.option_strings} & SCHEMA_DESTS:
        return common.EXIT_USAGE
    if event == "empty" and words[0] in EMPTY_IS_VALID and words[-1] != "diagnose":
        return common.EXIT_OK
    return common.EXIT_FINDINGS


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("voice")
    (root / "folder").mkdir()
    (root / "empty").write_bytes(b"")
    (root / "random").write_bytes(INPUTS_RANDOM)  # a fixed seed: the same bytes every run
    return {"missing": root / "missing", "folder": root / "folder", "empty": root / "empty",
            "random": root / "random"}


def test_readers_found():
    """The walk finds the verbs docs/cli.md names, sub-verbs of every format included."""
    names = {" ".join(w) for w in READERS}
    assert {"inspect", "verify", "generate", "doc", "diff", "htt verify", "ze info",
            "kladde info", "pile info", "htt salvage", "pile diagnose"} <= names


@pytest.mark.parametrize("words", list(READERS), ids=" ".join)
def test_every_reader_same_codes_one_line(words, inputs, tmp_path, capsys):
    p = READERS[words]
    for event in EVENTS:
        out = tmp_path / event
        out.mkdir()
        src = inputs[event]
        path = tmp_path / f"in-{event}"  # a copy: a verb that writes never touches the fixture
        if src.is_file():
            path.write_bytes(src.read_bytes())
        elif src.is_dir():
            path.mkdir()
        code = main(_argv(words, p, str(path), out))
        _, err = capsys.readouterr()
        want = _expected(words, p, event)
        assert code == want, (event, code, err)
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("project: ")]
        if code == 0:
            continue
        assert len(lines) == 1, (event, err)
        assert LINE.match(lines[0]), (event, lines[0])
        assert lines[0].startswith(f"bytewright {' '.join(words)}: "), (event, lines[0])
        assert str(path) in lines[0], (event, lines[0])
        assert not LEAK.search(lines[0]), (event, lines[0])


def test_long_lists_are_cut_with_a_count():
    items = [f"name{i}" for i in range(42)]
    line = common.error_line("inspect", "x: known names: " + ", ".join(items))
    assert line.endswith("… and 37 more") and "name5" not in line
    assert line.count("\n") == 0


def test_python_error_text_is_translated():
    """A byte that is not UTF-8 reads as such, not as a codec message or a class name."""
    try:
        b"ab\xd0(".decode("utf-8")
    except UnicodeDecodeError as exc:
        text = common.describe(exc, "f.bin")
    assert text == "f.bin:2: not valid UTF-8 text"
    line = common.error_line("htt verify", "f.htt: ConstraintError: offset 59: k: invalid "
                                           "utf-8: invalid continuation byte (expected None, "
                                           "found d0)")
    assert line == "bytewright htt verify: f.htt: offset 59: k: not valid UTF-8 text (byte d0)"
    try:
        b"ab\xd0(".decode("utf-8")
    except UnicodeDecodeError as exc:  # the codec's own words, passed through a message
        line = common.error_line("kladde info", f"f.kladde: {exc}")
    assert line == "bytewright kladde info: f.kladde: not valid UTF-8 text (byte d0 at position 2)"


def test_debug_keeps_the_exit_code(tmp_path, capsys):
    code = main(["--debug", "inspect", str(tmp_path / "missing.bin")])
    err = capsys.readouterr().err
    assert code == common.EXIT_IO
    assert "Traceback" in err
    assert err.strip().splitlines()[-1].startswith("bytewright inspect: ")


def test_empty_folder_and_glob_are_input_errors_for_verify_and_inspect(tmp_path, capsys):
    for argv in (["verify", str(tmp_path)], ["inspect", str(tmp_path)],
                 ["verify", str(tmp_path / "*.bin")]):
        assert main(argv) == common.EXIT_IO, argv
        assert LINE.match(capsys.readouterr().err)


def test_output_that_exists_is_an_input_error(tmp_path, capsys):
    fx = checks.parse_fixture(checks.FIXTURE_DIR / "htt" / "wal_all_ops_v2.hex").data
    src, dest = tmp_path / "s.htt", tmp_path / "dest"
    src.write_bytes(fx)
    dest.write_bytes(b"keep")
    assert main(["htt", "salvage", str(src), "--into", str(dest)]) == common.EXIT_IO
    assert "already exists" in capsys.readouterr().err
    assert dest.read_bytes() == b"keep"


def test_bench_quick_alone_is_a_usage_error(capsys):
    assert main(["bench", "--quick"]) == common.EXIT_USAGE
    assert "--baselines" in capsys.readouterr().err


def test_ze_info_json(monkeypatch, capsys):
    import json
    data = checks.parse_fixture(checks.FIXTURE_DIR / "ze" / "manifest_v2.hex").data
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["ze", "info", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["file"] == "-" and doc["bytes"] == len(data) and doc["kind"]


def test_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    for code in ("0  ok", "1  findings", "2  usage", "3  input", "4  internal"):
        assert code in out


# -- standard input, as a real process ------------------------------------------------

ENV = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT.parent)}


def _proc(args: list[str], data: bytes) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bytewright", *args], input=data,
                          capture_output=True, env=ENV, timeout=120)


def test_stdin_dash_reads_for_htt_from_a_pipe():
    """A real pipe: the store opens a temporary copy, and every message names ``-``."""
    data = checks.parse_fixture(checks.FIXTURE_DIR / "htt" / "wal_all_ops_v2.hex").data
    p = _proc(["htt", "verify", "-"], data)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().startswith("-: OK")
    assert b"bytewright-stdin" not in p.stdout + p.stderr


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize("argv", [["verify", "-"], ["ze", "verify", "-"],
                                  ["kladde", "info", "-"], ["pile", "info", "-"],
                                  ["htt", "info", "-"], ["inspect", "-"]], ids=" ".join)
def test_stdin_dash_on_reading_verbs(argv, monkeypatch, capsys):
    """``-`` is read, not taken for a path named '-': random bytes are findings (1)
    about ``-``, never 'no such file' (3)."""
    _stdin(monkeypatch, (INPUTS_RANDOM * 2)[:4096])
    assert main(argv) == common.EXIT_FINDINGS
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("project")]
    assert len(err) == 1 and err[0].startswith(f"bytewright {' '.join(argv[:-1])}: -"), err
    assert "bytewright-stdin" not in err[0]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_and_colour_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert common.progress(10, "verify") is None  # a pipe or a log: no progress text
    monkeypatch.setattr(sys, "stderr", _Tty())
    bar = common.progress(10, "verify")
    assert bar is not None
    bar.close()
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert common.colour(_Tty()) and not common.colour(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not common.colour(_Tty())


def test_ze_readers_show_how_far_they_have_read_on_a_terminal(tmp_path, monkeypatch):
    from bytewright.generated import ze as gz
    from bytewright.runtime.ze import wal

    body = gz.OpDeleteV1(gz.PayloadV1Header(), [7])
    payload = wal.encode_payload(wal.Op.delete_v1, body)
    path = tmp_path / "w.wal"
    path.write_bytes(wal.wal_bytes(1, [(wal.Op.delete_v1, payload)] * 50))
    monkeypatch.setattr(wal, "RELEASE_EVERY", 64)  # a release (and a report) every record
    monkeypatch.setattr(common, "PROGRESS_AFTER", 0)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["ze", "info", str(path)]) == 0
    assert "reading" in err.getvalue() and "B" in err.getvalue()
