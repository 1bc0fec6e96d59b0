"""``bytewright generate``: regenerate ``generated/`` from ``schemas/``."""

from __future__ import annotations

import argparse
import sys

from ..generator import pipeline


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="regenerate generated/ from the schemas")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = pipeline.run()
    for problem in result.problems:
        print(problem, file=sys.stderr)
    if result.problems:
        return 1
    pipeline.GENERATED_DIR.mkdir(exist_ok=True)
    for name, text in sorted(result.modules.items()):
        path = pipeline.GENERATED_DIR / name
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote generated/{name}")
        else:
            print(f"unchanged generated/{name}")
    return 0
