"""``bytewright check``: regenerate in memory, fail on drift, run every fixture."""

from __future__ import annotations

import argparse
import sys

from ..generator import checks, pipeline


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="fail on generated-code drift; run every golden fixture")
    p.add_argument("--no-compiled", action="store_true",
                   help="skip the compiled-Construct comparison (faster)")
    p.add_argument("--family", help="only this family's fixtures")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    failed = False
    result = pipeline.run()
    for problem in result.problems:
        print(problem, file=sys.stderr)
    if result.problems:
        print("check: schema problems; nothing generated", file=sys.stderr)
        return 1
    drifts = checks.drift(result)
    for d in drifts:
        failed = True
        records = ", ".join(d.records) if d.records else "(module-level)"
        print(f"DRIFT generated/{d.module}: records changed in the schema but not "
              f"regenerated: {records}", file=sys.stderr)
        print(d.diff[:20000], file=sys.stderr)
    if drifts:
        print("run `bytewright generate` and commit generated/ with the schema change",
              file=sys.stderr)
    else:
        print(f"generated/: no drift ({', '.join(sorted(result.modules))})")
    if drifts:
        return 1  # fixtures would run against stale code
    rows = []
    for fx in checks.fixtures(args.family):
        r = checks.check_fixture(fx, compiled=not args.no_compiled)
        failed |= not r.ok
        rows.append(r)
    print_table(rows)
    bad = [r for r in rows if not r.ok]
    print(f"{len(rows) - len(bad)} passed, {len(bad)} failed")
    return 1 if failed else 0


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
