"""What every verb shares: exit codes, one-line errors, reading inputs, the project.

Exit codes (the same for every verb and sub-verb, documented in docs/cli.md and in
``bytewright --help``):

====  ==================================================================
0     success
1     findings: corrupt, damaged or unrecognised data, failed checks, breaking changes
2     usage: a bad argument or option, a schema or project file with problems, an
      unknown name
3     I/O: a path that is missing, a folder where a file is read, an empty folder or a
      glob that matches nothing, unreadable input, an output that exists or cannot be
      written
4     internal error: a bug in bytewright or a plug-in (``--debug`` shows it)
141   the reader of our output went away (closed pipe; nothing printed)
====  ==================================================================

Every error is one line on stderr, ``bytewright VERB: FILE[:OFFSET]: message`` (a
sub-verb names both words: ``bytewright fixtures write: …``); long lists in it end in
``… and N more``. A verb signals an error by raising ``UsageError``, ``InputError`` or
``Findings`` (or by letting an ``OSError`` or a ``BytewrightError`` escape);
``cli/main.py`` prints it with ``error_line``. A verb that reports findings on stdout
and exits 1 says so on stderr with ``report``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
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
        return _stdin_bytes()
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
        yield _stdin_bytes(), lambda upto: None
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
    (``-``), or a schema file or folder. Schema problems raise ``DiffError`` of one line:
    the first problem (``FILE:LINE: …``) and how many more."""
    from ..review import diff

    try:
        return _schema_side(target, args, label, machine)
    except diff.DiffError as exc:
        head, *problems = str(exc).splitlines()
        if not head.endswith("schema problems:") or not problems:
            raise
        raise diff.DiffError(str(schema_problems([p.strip() for p in problems]))) from exc


def _schema_side(target: str | os.PathLike[str] | None, args: argparse.Namespace, label: str,
                machine: bool = False):  # -> review.diff.Side
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

        if not pipeline.schema_files(path):  # like an empty folder for a data verb
            raise InputError(f"{path}: no *.yaml schema files in this folder")
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


# -- one voice: the error line ------------------------------------------------------------

LIST_KEEP = 5  # items of a long list kept in an error line; the rest become "… and N more"
LINE_MAX = 400  # characters of one error line (a message longer than this is cut)


def verb_name(args: argparse.Namespace | None) -> str:
    """``fixtures write`` for a sub-verb, ``inspect`` for a verb (``cli/main.py`` records the
    words of the parser that matched as ``verb_path``)."""
    if args is None:
        return ""
    return getattr(args, "verb_path", None) or getattr(args, "verb", None) or ""


def more(items: list[str] | tuple[str, ...], keep: int = LIST_KEEP, sep: str = ", ") -> str:
    """``a, b, c, d, e … and 37 more`` for a list longer than ``keep``."""
    items = list(items)
    if len(items) <= keep + 1:
        return sep.join(items)
    return f"{sep.join(items[:keep])} … and {len(items) - keep} more"


_CLASS_REPR = re.compile(r"\b[A-Z][A-Za-z]*\(offset=\d+, marker=([0-9A-Fa-f]+)\)")
# a Python class name before its message ("ConstraintError: ", "WalDamaged: "): CamelCase
# of two humps or more, at the start or after a separator
_CLASS_PREFIX = re.compile(r"(?:(?<=^)|(?<=: )|(?<=\()|(?<=; ))(?:[A-Z][a-z]+){2,}: ")
_EXPECTED_NONE = re.compile(r" \(expected None, found ([^)]*)\)")
_UTF8 = re.compile(r"invalid utf-8: (?:invalid (?:start|continuation) byte|unexpected end "
                   r"of data)(?: \((?:expected None, )?found ([0-9a-f]+)\))?")
_CODEC = re.compile(r"'[\w-]+' codec can't decode bytes? (?:0x([0-9a-f]+) )?in position "
                    r"(\d+)(?:-\d+)?: [\w ]+")


def plain(message: str) -> str:
    """A message in the user's words: no Python class names or reprs, no ``expected None``,
    no codec jargon; one line, long lists shortened (``… and N more``)."""
    text = " ".join(ln.strip() for ln in str(message).splitlines() if ln.strip())
    text = _UTF8.sub(lambda m: "not valid UTF-8 text" + (f" (byte {m.group(1)})"
                                                          if m.group(1) else ""), text)
    text = _CODEC.sub(lambda m: "not valid UTF-8 text (" + (
        f"byte {m.group(1)} " if m.group(1) else "") + f"at position {m.group(2)})", text)
    text = _CLASS_REPR.sub(lambda m: f"unknown record marker {m.group(1)}", text)
    text = _EXPECTED_NONE.sub(lambda m: f" (found {m.group(1)})", text)
    text = _CLASS_PREFIX.sub("", text)
    text = "; ".join(_shorten(part) for part in text.split("; "))
    if len(text) > LINE_MAX:
        text = text[:LINE_MAX - 1].rstrip() + "…"
    return text


def _shorten(part: str) -> str:
    """One ``;``-separated part of a message with a list of more than LIST_KEEP + 1
    comma-separated items (``known magics: a, b, c, …``) cut to its first LIST_KEEP."""
    items = part.split(", ")  # the first item carries the list's label ("magics: a")
    return part if len(items) <= LIST_KEEP + 1 else more(items)


def where(path: str | os.PathLike[str] | None, offset: int | None = None) -> str:
    """``FILE`` or ``FILE:OFFSET`` (standard input is ``-``)."""
    name = os.fspath(path) if path is not None else ""
    return f"{name}:{offset}" if offset is not None and name else name


def describe(exc: BaseException, path: str | os.PathLike[str] | None = None) -> str:
    """``FILE[:OFFSET]: message`` for an error raised while reading ``path``."""
    from ..runtime.errors import DecodeError

    if isinstance(exc, CliError):
        return plain(str(exc))
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else path
        text = io_message(name if name is not None else "", exc)
        return plain(text if name is not None else text.removeprefix(": "))
    if isinstance(exc, UnicodeDecodeError):
        return plain(f"{where(path, exc.start)}: not valid UTF-8 text")
    if isinstance(exc, DecodeError):
        name = exc.file or path
        parts = [exc.path] if exc.path else []
        text = exc.message
        if exc.expected is not None or exc.found is not None:
            from ..runtime import errors as errors_mod
            text += (f" (expected {errors_mod._show(exc.expected)}, "
                     f"found {errors_mod._show(exc.found)})")
        body = ": ".join([*parts, text])
        if name is None:
            return plain(f"offset {exc.offset}: {body}" if exc.offset is not None else body)
        return plain(f"{where(name, exc.offset)}: {body}")
    text = str(exc) or type(exc).__name__
    name = os.fspath(path) if path is not None else ""
    if name and not text.startswith(name):
        text = f"{name}: {text}"
    return plain(text)


def error_line(verb: str, message: str) -> str:
    """The one line every error is printed as: ``bytewright VERB: FILE[:OFFSET]: message``."""
    for tmp, name in _SHOWN_AS.items():  # standard input's temporary copy is "-"
        message = message.replace(tmp, name)
    message = plain(message)
    if message.startswith("bytewright"):  # argparse's own, already naming the verb
        return message
    return f"bytewright {verb}: {message}" if verb else f"bytewright: {message}"


def report(args: argparse.Namespace | str, message: str) -> None:
    """Print one error line for the verb of ``args`` (or the verb named) on stderr: what
    a verb that prints a report on stdout and exits 1 says about why."""
    verb = args if isinstance(args, str) else verb_name(args)
    print(error_line(verb, message), file=sys.stderr, flush=True)


def exit_code(exc: BaseException) -> int:
    """The shared exit code of an error (see the table above)."""
    from ..runtime.errors import BytewrightError

    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, project_mod.ProjectError):
        return EXIT_IO if exc.io else EXIT_USAGE
    if isinstance(exc, OSError):
        return EXIT_IO
    if isinstance(exc, BytewrightError):
        return EXIT_FINDINGS
    return EXIT_INTERNAL


def new_output(path: str | os.PathLike[str], verb: str = "salvage") -> None:
    """An output that must not exist yet: ``InputError`` (exit 3) when it does."""
    if os.path.lexists(path):
        raise InputError(f"{os.fspath(path)}: already exists; {verb} never overwrites")


# -- standard input -----------------------------------------------------------------------

_SHOWN_AS: dict[str, str] = {}  # temporary copies of standard input -> "-"
STDIN_MAX = 1 << 30  # bytes of standard input a verb takes (1 GiB); more: save to a file


def _stdin_bytes() -> bytes:
    """Standard input, at most STDIN_MAX bytes (more is an input error, exit 3)."""
    data = sys.stdin.buffer.read(STDIN_MAX + 1)
    if len(data) > STDIN_MAX:
        raise InputError(f"-: standard input is over {STDIN_MAX >> 20} MiB; save it to a "
                         "file and name the file")
    return data


@contextlib.contextmanager
def real_file(path: str | os.PathLike[str], suffix: str = "") -> Iterator[str]:
    """A path a reader can open (and map): ``path`` itself, or for ``-`` a temporary
    file holding standard input (at most STDIN_MAX bytes), removed afterwards."""
    if os.fspath(path) != STDIN:
        p = Path(path)
        if p.is_dir():
            raise InputError(f"{p}: is a folder, not a file")
        if not p.exists():
            raise InputError(f"{p}: no such file or folder")
        yield os.fspath(path)
        return
    import tempfile

    data = _stdin_bytes()
    fd, tmp = tempfile.mkstemp(prefix="bytewright-stdin-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        del data
        _SHOWN_AS[tmp] = STDIN
        yield tmp
    finally:
        _SHOWN_AS.pop(tmp, None)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


# -- progress and colour --------------------------------------------------------------------

PROGRESS_AFTER = 2.0  # seconds: work expected to take longer shows a bar (on a terminal)


def progress(total: int, desc: str, unit: str = "file", enabled: bool = True):
    """A tqdm bar on stderr when stderr is a terminal (None otherwise: pipes and logs get
    no progress text). It appears only once the work has run PROGRESS_AFTER seconds."""
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                delay=PROGRESS_AFTER, unit_scale=unit == "B")


@contextlib.contextmanager
def reading_progress(total: int, desc: str = "reading") -> Iterator[Callable[[int], None]]:
    """``report(upto)`` for a reader that walks a file once: a bytes bar on a terminal once
    the walk has taken PROGRESS_AFTER seconds (nothing elsewhere)."""
    bar = progress(total, desc, unit="B")
    if bar is None:
        yield lambda upto: None
        return

    def report(upto: int) -> None:
        if upto > bar.n:
            bar.update(upto - bar.n)

    try:
        yield report
    finally:
        bar.close()


def colour(stream: Any = None) -> bool:
    """Whether output to ``stream`` may be coloured: a terminal and no ``NO_COLOR``.
    (bytewright prints no colour today; a verb that adds it asks here first.)"""
    stream = sys.stdout if stream is None else stream
    return "NO_COLOR" not in os.environ and bool(getattr(stream, "isatty", lambda: False)())


def schema_problems(problems: list[Any], listed: bool = False) -> UsageError:
    """The one error line for schemas with problems (exit 2): the first problem and how
    many more (``listed``: the verb printed them all on stdout already)."""
    problems = list(problems)
    more_ = len(problems) - 1
    tail = ("" if not more_ else f" (and {more_} more schema problem(s)"
            + ("; listed above)" if listed else "; `bytewright check` lists them)"))
    return UsageError(f"{problems[0]}{tail}")
