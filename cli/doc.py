"""``bytewright doc``: Markdown, a static HTML site and JSON from the schemas' IR."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..review import diff, docs
from . import common
from .progress import Progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doc", help="write layout documentation (Markdown, HTML, JSON)",
                       description="Write index.md + <family>.md, index.html + <family>.html "
                                   "and layouts.json for every family. Exit 2 on schema "
                                   "errors, 3 when a path cannot be read or written.")
    p.add_argument("--out", type=Path, default=Path("site"), help="output folder (default site/)")
    p.add_argument("schemas", nargs="?",
                   help="schema folder or file, or - for standard input "
                        "(default: the project's schemas)")
    common.add_project_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with Progress("doc") as progress, diff.showing(progress):
        try:
            side = common.schema_side(args.schemas, args, "schemas")
        except diff.DiffError as exc:
            raise common.UsageError(str(exc)) from exc
        if args.out.exists() and not args.out.is_dir():
            raise common.InputError(f"{args.out}: --out exists and is not a folder")
        progress("writing pages")
        try:
            written = docs.write(args.out, side)
        except OSError as exc:
            raise common.InputError(common.io_message(exc.filename or args.out, exc)) from exc
    for path in written:
        print(path)
    return 0
