"""``bytewright check``: regenerate in memory, fail on drift, run every fixture.

Works on the project of the current folder (or ``--project``): its schemas, its output
folder and its fixtures; families are the ones its schemas define.
"""

from __future__ import annotations

import argparse
import sys

from ..generator import pipeline
from ..generator import project as project_mod
from ..review import checks
from . import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="fail on generated-code drift; run every golden fixture")
    p.add_argument("--no-compiled", action="store_true",
                   help="skip the compiled-Construct comparison (faster)")
    p.add_argument("--family", help="only this family's fixtures (a family of the project)")
    p.add_argument("--properties", action="store_true",
                   help="instead: run the codec-truth property on every record "
                        "(docs/properties.md)")
    p.add_argument("--examples", type=int, default=20, metavar="N",
                   help="with --properties: values drawn per record (default 20)")
    common.add_project_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    proj = common.project(args)
    common.announce(proj)
    if args.properties:
        return run_properties(proj, args)
    try:
        proj.activate()
        result = pipeline.run(proj.schema_files(), base=proj.root)
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    for problem in result.problems:
        print(problem)
    if result.problems:
        raise common.schema_problems(result.problems, listed=True)
    if args.family is not None and args.family not in result.families:
        raise common.UsageError(f"no family {args.family!r} in this project; families: "
                                f"{', '.join(sorted(result.families)) or '(none)'}")
    out_label = proj.display(proj.output)
    drifts = checks.drift(result, proj.output)
    for d in drifts:
        if d.module in result.modules and not (proj.output / d.module).is_file():
            print(f"DRIFT {out_label}/{d.module}: not generated yet", file=sys.stderr)
            continue
        records = ", ".join(d.records) if d.records else "(module-level)"
        print(f"DRIFT {out_label}/{d.module}: records changed in the schema but not "
              f"regenerated: {records}", file=sys.stderr)
        print(d.diff[:20000], file=sys.stderr)
    if drifts:
        print(f"run `bytewright generate` and commit {out_label}/ with the schema change",
              file=sys.stderr)
        return common.EXIT_FINDINGS  # fixtures would run against stale code
    print(f"{out_label}/: no drift ({', '.join(sorted(result.modules))})")
    rows, failed = [], False
    for path in checks.fixture_paths(args.family, proj.fixtures):
        try:
            fx = checks.parse_fixture(path)
        except checks.FixtureFileError as exc:
            print(f"FAIL {proj.display(path)}: {exc}", file=sys.stderr)
            failed = True
            continue
        if fx.family not in result.families:
            print(f"FAIL {proj.display(path)}: folder {fx.family!r} is not a family of this "
                  f"project ({', '.join(sorted(result.families))})", file=sys.stderr)
            failed = True
            continue
        r = checks.check_fixture(fx, compiled=not args.no_compiled, module=proj.load_module)
        failed |= not r.ok
        rows.append(r)
    print_table(rows)
    bad = [r for r in rows if not r.ok]
    print(f"{len(rows) - len(bad)} passed, {len(bad)} failed")
    return common.EXIT_FINDINGS if failed else common.EXIT_OK


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
