"""The ``bytewright`` command line.

Verbs live one per module in this package: any ``cli/<verb>.py`` that defines
``register(subparsers)`` is picked up, so a new verb never edits this file. Each
``register`` adds its parser and sets ``func`` (taking the parsed args, returning an exit
code).

Every failure becomes one line on stderr and a shared exit code (see ``cli/common.py``):
verbs raise ``UsageError``/``InputError``/``Findings`` or let an ``OSError`` or a
project error escape, and ``main`` maps it. ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

import bytewright
import bytewright.cli as cli_pkg

from .common import (
    EXIT_INTERNAL,
    EXIT_PIPE,
    UsageError,
    describe,
    error_line,
    exit_code,
    verb_name,
)

EPILOG = """\
errors: one line on stderr, `bytewright VERB: FILE[:OFFSET]: message`.
exit codes (the same for every verb):
  0  ok
  1  findings: corrupt, damaged or unrecognised data; failed checks; breaking changes
  2  usage: a bad argument or option; a schema or project file with problems
  3  input: a missing or unreadable path, a folder where a file is read, an empty
     folder or a glob matching nothing, an output that already exists
  4  internal error (a bug; rerun with --debug for the traceback)
`-` as FILE reads standard input (up to 1 GiB). See docs/cli.md."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (exit 2) instead of usage text + exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def _verbs(only: str | None = None) -> list[str]:
    """The verb modules to register: ``only`` when it names one (a run imports just its
    own verb and what that needs), else every one (help, an unknown verb)."""
    names = sorted(info.name for info in pkgutil.iter_modules(cli_pkg.__path__)
                   if info.name not in ("main", "common") and not info.name.startswith("_"))
    return [only] if only in names else names


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = Parser(
        prog="bytewright",
        description="Schema-driven codecs for append-only binary storage formats.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version",
                        version=f"bytewright {bytewright.__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for name in _verbs(only):
        module = importlib.import_module(f"bytewright.cli.{name}")
        if hasattr(module, "register"):
            module.register(sub)
    _name_leaves(parser, ())
    return parser


def _name_leaves(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
    """Record on every verb's parser the words that reach it (``fixtures write``): the name
    its error lines carry."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        if words:
            parser.set_defaults(verb_path=" ".join(words))
        return
    for name, child in subs[0].choices.items():
        _name_leaves(child, (*words, name))


def _fail(verb: str | None, message: str, code: int) -> int:
    print(error_line(verb or "", message), file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]  # accepted anywhere, not only before VERB
    if argv == ["--version"]:  # answered without importing every verb
        print(f"bytewright {bytewright.__version__}")
        return 0
    verb = next((a for a in argv if not a.startswith("-")), None)
    args = None
    try:
        try:
            helped = any(a in ("-h", "--help") for a in argv[:argv.index(verb)]) \
                if verb is not None else True
            args = build_parser(None if helped else verb).parse_args(argv)
        except SystemExit as exc:  # --help / --version print and exit 0
            return int(exc.code or 0)
        verb = verb_name(args)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        print("bytewright: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:  # the traceback, then the same line and exit code as without --debug
            import traceback

            traceback.print_exc()
        try:
            return _report(verb, exc, args)
        except BrokenPipeError:
            return _closed_pipe()


def _report(verb: str | None, exc: Exception, args: argparse.Namespace | None = None) -> int:
    """One line and the exit code for an error no verb handled."""
    code = exit_code(exc)
    if code == EXIT_INTERNAL:
        return _fail(verb, f"internal error ({type(exc).__name__}): {exc} "
                           "(a bug; rerun with --debug for the traceback)", EXIT_INTERNAL)
    return _fail(verb, describe(exc, getattr(args, "file", None)), code)


def _closed_pipe() -> int:
    """The reader went away: say nothing, and keep Python from complaining at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced in-process (tests): nothing to redirect
        pass
    return EXIT_PIPE


def entry() -> None:
    raise SystemExit(main(sys.argv[1:]))
