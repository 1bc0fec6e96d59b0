"""``bytewright diff``: compare layout sets and classify changes by compatibility rule."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..generator import diff, diff_rules


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff", help="compare schema layouts (folders, files, a git revision, or versions)",
        description="Compare two layout sets and classify every change: WIRE-BREAKING, "
                    "ID-CONTRACT, ADDITIVE, DOC. Exits 1 when a breaking change is found "
                    "(unless allowed with --allow), 2 on usage or schema errors.")
    p.add_argument("old", nargs="?", type=Path, help="old schema folder or file")
    p.add_argument("new", nargs="?", type=Path,
                   help="new schema folder or file (default with --against: schemas/)")
    p.add_argument("--against", metavar="REV",
                   help="compare the working-tree schemas (or NEW) against git revision REV")
    p.add_argument("--versions", metavar="RECORD",
                   help="compare version N against N+1 of RECORD within one schema "
                        "(OLD, default the shipped schemas)")
    p.add_argument("--family", help="with --versions: the family holding RECORD")
    p.add_argument("--format", choices=sorted(diff.RENDERERS), default="text")
    p.add_argument("--allow", action="append", default=[], metavar="RULE_ID",
                   help="accept findings of this rule (id or name); repeatable")
    p.add_argument("--code", action="store_true",
                   help="also print the unified diff of the generated modules")
    p.add_argument("--rules", action="store_true", help="list the rules and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.rules:
        for r in diff_rules.RULES:
            print(f"{r.id}  {r.category:<13} {r.name:<24} {r.purpose}")
        return 0
    unknown = [a for a in args.allow if diff_rules.find(a) is None]
    if unknown:
        print(f"diff: unknown rule(s) for --allow: {', '.join(unknown)} "
              "(see `bytewright diff --rules`)", file=sys.stderr)
        return 2
    try:
        if args.versions:
            side = diff.load_path(args.old) if args.old else diff.shipped("schemas")
            report = diff.version_steps(side, args.versions, args.family)
        elif args.against:
            if args.old and args.new:
                print("diff: give at most one path with --against", file=sys.stderr)
                return 2
            target = args.old or args.new
            new = diff.load_path(target) if target else diff.shipped("working tree")
            old = diff.load_revision(args.against)
            report = diff.compare(old, new, set(args.allow))
            if args.code:
                report.code_diff = diff.code_diff(old, new)
        else:
            if not (args.old and args.new):
                print("diff: give OLD and NEW, or --against REV, or --versions RECORD",
                      file=sys.stderr)
                return 2
            old, new = diff.load_path(args.old), diff.load_path(args.new)
            report = diff.compare(old, new, set(args.allow))
            if args.code:
                report.code_diff = diff.code_diff(old, new)
    except diff.DiffError as exc:
        print(f"diff: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(diff.RENDERERS[args.format](report))
    return report.exit_code
