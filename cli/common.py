"""What every verb shares: exit codes, one-line errors, reading inputs, the project.

Exit codes (the same for every verb, documented in README.md):

====  ==================================================================
0     success
1     findings: corrupt or invalid data, failed checks, breaking changes
2     usage: a bad argument, option, project file or unknown name
3     I/O: a path that is missing, a folder, unreadable or unwritable
4     internal error: a bug in bytewright or a plug-in (``--debug`` shows it)
141   the reader of our output went away (closed pipe; nothing printed)
====  ==================================================================

A verb signals an error by raising ``UsageError``, ``InputError`` or ``Findings`` (or by
letting an ``OSError`` or a ``bytewright.runtime.errors.BytewrightError`` escape);
``cli/main.py`` turns each into one line on stderr and its exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..generator import project as project_mod

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_IO = 3
EXIT_INTERNAL = 4
EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe

STDIN = "-"


class CliError(Exception):
    """An error with its exit code; ``str()`` is the one line printed."""

    code = EXIT_FINDINGS

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(CliError):
    code = EXIT_USAGE


class InputError(CliError):
    """A path that cannot be read or written (exit 3)."""

    code = EXIT_IO


class Findings(CliError):
    code = EXIT_FINDINGS


def io_message(path: str | os.PathLike[str], exc: OSError) -> str:
    """``PATH: reason`` for an OSError, in words a user reads."""
    if isinstance(exc, FileNotFoundError):
        why = "no such file or folder"
    elif isinstance(exc, IsADirectoryError):
        why = "is a folder, not a file"
    elif isinstance(exc, NotADirectoryError):
        why = "a part of the path is not a folder"
    elif isinstance(exc, PermissionError):
        why = "permission denied"
    else:
        why = exc.strerror or str(exc)
    return f"{os.fspath(path)}: {why}"


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path`` (``-``: standard input); ``InputError`` (exit 3) otherwise."""
    if os.fspath(path) == STDIN:
        return sys.stdin.buffer.read()
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a file")
    try:
        return p.read_bytes()
    except OSError as exc:
        raise InputError(io_message(p, exc)) from exc


@contextlib.contextmanager
def mapped_input(path: str | os.PathLike[str]) -> Iterator[tuple[Any, Callable[[int], None]]]:
    """``read_input`` for a reader that walks a file once: ``(buf, release)`` of a map of
    it (``runtime/mapped.py``: no copy, walked pages given back), standard input's bytes
    for ``-``; the same ``InputError`` (exit 3) otherwise."""
    from ..runtime.mapped import mapped_file

    if os.fspath(path) == STDIN:
        yield sys.stdin.buffer.read(), lambda upto: None
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a file")
    try:
        ctx = mapped_file(p)
        buf = ctx.__enter__()
    except OSError as exc:
        raise InputError(io_message(p, exc)) from exc
    try:
        yield buf
    finally:
        ctx.__exit__(None, None, None)


def read_text(path: str | os.PathLike[str], what: str = "text") -> str:
    """``read_input`` decoded as UTF-8; not UTF-8 is a finding about the file (exit 1)."""
    data = read_input(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Findings(f"{os.fspath(path)}: not UTF-8 {what} (byte {exc.start})") from exc


def existing_path(path: Path, what: str = "file or folder") -> Path:
    """``path`` if it exists, else ``InputError``."""
    if not path.exists():
        raise InputError(f"{path}: no such {what}")
    return path


def add_project_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", metavar="PATH",
                   help="project file or folder (default: the nearest bytewright.toml or "
                        "pyproject.toml [tool.bytewright] from the current folder, else the "
                        "formats bytewright ships)")


def project(args: argparse.Namespace, fallback: bool = True) -> project_mod.Project:
    """The project of this invocation, or a one-line error (exit 2, or 3 if unreadable);
    ``fallback=False``: no project found is an error, not the package's own project."""
    try:
        return project_mod.resolve(getattr(args, "project", None), fallback=fallback)
    except project_mod.ProjectError as exc:
        raise (InputError if exc.io else UsageError)(str(exc)) from exc


def project_error(exc: project_mod.ProjectError) -> CliError:
    return (InputError if exc.io else UsageError)(str(exc))


def announce(proj: project_mod.Project, machine: bool = False) -> None:
    """The first line of a verb's output: which project it works on (stderr when stdout
    carries machine-readable output)."""
    print(proj.describe(), file=sys.stderr if machine else sys.stdout)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


def activate_quietly(args: argparse.Namespace) -> None:
    """Load the plug-ins of the current project (if any) before reading schema paths
    given on the command line: their checksum or codec names may come from a plug-in."""
    try:
        proj = project_mod.resolve(getattr(args, "project", None))
    except project_mod.ProjectError as exc:
        if getattr(args, "project", None):
            raise project_error(exc) from exc
        return
    try:
        proj.activate()
    except project_mod.ProjectError as exc:
        raise project_error(exc) from exc


def schema_side(target: str | os.PathLike[str] | None, args: argparse.Namespace, label: str,
                machine: bool = False):  # -> review.diff.Side
    """A loaded layout set: the project's schemas (``target`` None), standard input
    (``-``), or a schema file or folder. Schema problems raise ``DiffError``."""
    from ..review import diff

    if target is None:
        proj = project(args)
        announce(proj, machine)
        try:
            proj.activate()
            files = proj.schema_files()
        except project_mod.ProjectError as exc:
            raise project_error(exc) from exc
        return diff._side(label, files, None, proj.root)
    activate_quietly(args)
    if os.fspath(target) == STDIN:
        text = read_text(STDIN, "schema text")
        return diff.load_texts({Path("stdin.yaml"): text}, label or "stdin", base=Path.cwd())
    path = existing_path(Path(target), "schema file or folder")
    if path.is_dir():
        from ..generator import pipeline

        if not pipeline.schema_files(path):
            raise UsageError(f"{path}: no *.yaml schema files in this folder")
    else:
        read_input(path)  # unreadable -> exit 3 before the schema pipeline sees it
    return diff.load_path(path, label or str(path))


def kept_lines(path: str) -> list[str]:
    """One line per side file an earlier cut or overwrite of ``path`` left beside it
    (``bytewright.runtime.cut``), for the format verbs' ``info``."""
    from ..runtime.cut import side_files

    if path == "-":
        return []
    return [f"  bytes an earlier repair removed are kept in {p} ({os.path.getsize(p)} bytes)"
            for p in side_files(path)]
