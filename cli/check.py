"""``bytewright check``: regenerate in memory, fail on drift, run every fixture.

Works on the project of the current folder (or ``--project``): its schemas, its output
folder and its fixtures; families are the ones its schemas define.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..generator import project as project_mod
from ..review import check_run, checks
from . import common
from .progress import Progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="fail on generated-code drift; run every golden fixture",
        description="Compare every family's checked-in module with a fresh generation "
                    "(drift), then run the golden fixtures. A family whose schema sources, "
                    "generator and checked-in module are unchanged since a clean check is "
                    "not generated again (cache in .bytewright-cache/ under the project). "
                    "Exit 0: all ok; 1: drift or a failed fixture; 2: usage or schema "
                    "problems; 3: a missing or unreadable input; 4: internal error.")
    p.add_argument("--no-compiled", action="store_true",
                   help="skip the compiled-Construct comparison (faster)")
    p.add_argument("--family", help="only this family: its drift and its fixtures")
    p.add_argument("--no-cache", action="store_true",
                   help="generate and compare every family, whatever an earlier check found")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (drift and fixtures per family, totals)")
    p.add_argument("--junit", type=Path, metavar="FILE",
                   help="also write JUnit XML to FILE (a test case per fixture and per "
                        "drift check)")
    p.add_argument("--properties", action="store_true",
                   help="instead: run the codec-truth property on every record "
                        "(docs/properties.md)")
    p.add_argument("--examples", type=int, default=20, metavar="N",
                   help="with --properties: values drawn per record (default 20)")
    common.add_project_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    proj = common.project(args)
    common.announce(proj, machine=args.json)
    if args.properties:
        if args.json or args.junit or args.no_cache:
            raise common.UsageError("--json, --junit and --no-cache do not apply with "
                                    "--properties")
        return run_properties(proj, args)
    if args.junit is not None and args.junit.is_dir():
        raise common.InputError(f"{args.junit}: --junit names a folder, not a file")
    try:
        with Progress("check") as progress:
            report = check_run.run(proj, family=args.family, compiled=not args.no_compiled,
                                   use_cache=not args.no_cache, progress=progress)
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    except check_run.UnknownFamily as exc:
        raise common.UsageError(str(exc)) from exc
    if args.junit is not None:
        try:
            args.junit.write_text(check_run.render_junit(report), encoding="utf-8")
        except OSError as exc:
            raise common.InputError(common.io_message(args.junit, exc)) from exc
    if args.json:
        sys.stdout.write(check_run.render_json(report))
        return report.exit_code
    return print_text(report)


def print_text(report: check_run.Report) -> int:
    """The human form: problems and drift on stderr, the fixture table on stdout."""
    for problem in report.problems:
        print(problem, file=sys.stderr)
    if report.problems:
        print("check: schema problems; nothing generated", file=sys.stderr)
        return report.exit_code
    out_label = report.output
    drifts = [*report.drifted]
    for d in drifts:
        if d.missing:
            print(f"DRIFT {out_label}/{d.module}: not generated yet", file=sys.stderr)
            continue
        records = ", ".join(d.drift.records) if d.drift.records else "(module-level)"
        print(f"DRIFT {out_label}/{d.module}: records changed in the schema but not "
              f"regenerated: {records}", file=sys.stderr)
        print(d.drift.diff[:20000], file=sys.stderr)
    for o in report.orphans:
        print(f"DRIFT {out_label}/{o.module}: records changed in the schema but not "
              f"regenerated: (module-level)", file=sys.stderr)
        print(o.diff, file=sys.stderr)
    if drifts or report.orphans:
        print(f"run `bytewright generate` and commit {out_label}/ with the schema change",
              file=sys.stderr)
        return report.exit_code  # fixtures would run against stale code
    modules = ", ".join(f"{name}.py" for name in report.families)
    print(f"{out_label}/: no drift ({modules})")
    rows = []
    for fam in report.families.values():
        for b in fam.broken:
            print(f"FAIL {b.name}: {b.message}", file=sys.stderr)
        rows.extend(fam.fixtures)
    for st in report.strays:
        print(f"FAIL {st.name}: {st.message}", file=sys.stderr)
    print_table(rows)
    bad = [r for r in rows if not r.ok]
    print(f"{len(rows) - len(bad)} passed, {len(bad)} failed")
    return report.exit_code


def print_table(rows: list[checks.FixtureResult]) -> None:
    headers = ["fixture", "record", "bytes", "decode", "re-encode", "construct", "compiled",
               "construct-encode", "result"]
    table = []
    for r in rows:
        fx = r.fixture
        cells = [f"{fx.family}/{fx.path.name}", fx.record, str(r.size)]
        for key in headers[3:-1]:
            v = r.checks.get(key)
            cells.append("-" if v is None else ("ok" if v else "FAIL"))
        cells.append("ok" if r.ok else "FAIL")
        table.append(cells)
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h)
              for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row, r in zip(table, rows, strict=True):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if r.error:
            print(f"    error: {r.error}")


def run_properties(proj: project_mod.Project, args: argparse.Namespace) -> int:
    """``--properties``: one line per record and property, a summary, exit 1 on a failure."""
    from ..properties import check_project  # noqa: PLC0415 - needs hypothesis (test extra)

    if args.examples < 1:
        raise common.UsageError("--examples must be at least 1")
    try:
        report = check_project(proj, max_examples=args.examples,
                               family=args.family, progress=lambda r: print(r.line()))
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    if args.family is not None and not report.results:
        raise common.UsageError(f"no family {args.family!r} with records in this project")
    print(report.summary())
    return common.EXIT_OK if report.ok else common.EXIT_FINDINGS
