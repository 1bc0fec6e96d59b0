"""The ``bytewright`` command line.

Verbs live one per module in this package: any ``cli/<verb>.py`` that defines
``register(subparsers)`` is picked up, so a new verb never edits this file. Each
``register`` adds its parser and sets ``func`` (taking the parsed args, returning an exit
code).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import bytewright.cli as cli_pkg


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bytewright",
        description="Schema-driven codecs for append-only binary storage formats.")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if info.name in ("main", "common") or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"bytewright.cli.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


def entry() -> None:
    raise SystemExit(main(sys.argv[1:]))
