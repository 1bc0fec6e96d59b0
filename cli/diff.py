"""``bytewright diff``: compare layout sets and classify changes by compatibility rule."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..generator import project as project_mod
from ..review import diff, diff_rules, docs
from . import common
from .progress import Progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff", help="compare schema layouts (folders, files, a git revision, or versions)",
        description="Compare two layout sets and classify every change: WIRE-BREAKING, "
                    "API-BREAKING (renames and other generated-API changes, not one byte), "
                    "ID-CONTRACT, ADDITIVE, DOC. Exits 1 when a breaking change is found "
                    "(unless allowed with --allow or the project file's [diff] except = "
                    "[...]), 2 on usage or schema errors.")
    p.add_argument("old", nargs="?", help="old schema folder or file (- for standard input)")
    p.add_argument("new", nargs="?",
                   help="new schema folder or file (default with --against: the project's "
                        "schemas)")
    p.add_argument("--against", metavar="REV",
                   help="compare the working-tree schemas (or NEW) against git revision REV")
    p.add_argument("--versions", metavar="RECORD",
                   help="compare version N against N+1 of RECORD within one schema "
                        "(OLD, default the shipped schemas)")
    p.add_argument("--family", help="with --versions: the family holding RECORD")
    p.add_argument("--format", choices=sorted([*diff.RENDERERS, "html"]), default="text")
    p.add_argument("--allow", action="append", default=[], metavar="RULE_ID",
                   help="accept findings of this rule (id or name); repeatable")
    p.add_argument("--code", action="store_true",
                   help="also print the unified diff of the generated modules")
    p.add_argument("--rules", action="store_true", help="list the rules and exit")
    common.add_project_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.rules:
        for r in diff_rules.RULES:
            print(f"{r.id}  {r.category:<13} {r.name:<24} {r.purpose}")
        return 0
    unknown = [a for a in args.allow if diff_rules.find(a) is None]
    if unknown:
        raise common.UsageError(f"unknown rule(s) for --allow: {', '.join(unknown)} "
                                "(see `bytewright diff --rules`)")
    if args.family and not args.versions:
        raise common.UsageError("--family only applies with --versions RECORD")
    if args.old == common.STDIN and args.new == common.STDIN:
        raise common.UsageError("only one side can be read from standard input")
    machine = args.format != "text"
    args.allow = [*args.allow, *_project_excepts(args)]
    with Progress("diff") as progress, diff.showing(progress):
        return _run(args, machine)


def _run(args: argparse.Namespace, machine: bool) -> int:
    try:
        if args.versions:
            if args.new:
                raise common.UsageError("--versions compares within one schema: give at most "
                                        "one path")
            side = common.schema_side(args.old, args, "schemas", machine)
            report = diff.version_steps(side, args.versions, args.family)
        elif args.against:
            if args.old and args.new:
                raise common.UsageError("give at most one path with --against")
            target = args.old or args.new
            if not target:  # the project's history: never the installed package's own
                common.project(args, fallback=False)
            new = common.schema_side(target, args, "working tree", machine)
            old = diff.load_revision(args.against, _revision_folder(args, target))
            report = diff.compare(old, new, set(args.allow))
            if args.code:
                report.code_diff = diff.code_diff(old, new)
        else:
            if not (args.old and args.new):
                raise common.UsageError("give OLD and NEW, or --against REV, or --versions "
                                        "RECORD")
            old = common.schema_side(args.old, args, args.old)
            new = common.schema_side(args.new, args, args.new)
            report = diff.compare(old, new, set(args.allow))
            if args.code:
                report.code_diff = diff.code_diff(old, new)
    except diff.DiffError as exc:
        raise common.UsageError(str(exc)) from exc  # main prints it on one line
    render = docs.render_diff_html if args.format == "html" else diff.RENDERERS[args.format]
    sys.stdout.write(render(report))
    return report.exit_code


def _project_excepts(args: argparse.Namespace) -> list[str]:
    """Rules the project file accepts (``[diff] except = ["W004", ...]``, like buf's)."""
    try:
        proj = project_mod.resolve(getattr(args, "project", None))
    except project_mod.ProjectError as exc:
        if getattr(args, "project", None):
            raise common.project_error(exc) from exc
        return []
    try:
        return diff.project_excepts(proj.sections)
    except diff.DiffError as exc:
        raise common.UsageError(f"{proj.describe()}: {exc}") from exc


def _revision_folder(args: argparse.Namespace, target: str | None) -> Path:
    """The schema folder whose history ``--against`` reads: TARGET's, or the project's."""
    if target and target != common.STDIN:
        path = Path(target)
        return path if path.is_dir() else path.parent
    proj = common.project(args)
    try:
        files = proj.schema_files()
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    folders = [s for s in proj.schemas if s.is_dir()]
    return folders[0] if folders else (files[0].parent if files else proj.root)
