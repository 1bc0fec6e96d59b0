"""``bytewright doc``: Markdown, a static HTML site and JSON from the schemas' IR."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..generator import diff, docs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doc", help="write layout documentation (Markdown, HTML, JSON)",
                       description="Write index.md + <format>.md, index.html + <format>.html "
                                   "and layouts.json for every family.")
    p.add_argument("--out", type=Path, default=Path("site"), help="output folder (default site/)")
    p.add_argument("schemas", nargs="?", type=Path,
                   help="schema folder or file (default: the shipped schemas)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        side = diff.load_path(args.schemas) if args.schemas else diff.shipped("schemas")
    except diff.DiffError as exc:
        print(f"doc: {exc}", file=sys.stderr)
        return 2
    written = docs.write(args.out, side)
    for path in written:
        print(path)
    return 0
