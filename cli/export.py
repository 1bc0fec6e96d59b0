"""``bytewright export``: layouts as Kaitai Struct ``.ksy`` files, or a file's records as
tables (Arrow, Parquet, JSON lines). The work is in ``review/export_ksy.py`` and
``review/export_table.py``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..generator import pipeline
from ..generator import project as project_mod
from ..review import export_ksy
from . import common

TABLE_TARGETS = ("arrow", "parquet", "jsonl")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export the layouts (ksy) or a file's records "
                                      "(arrow, parquet, jsonl)",
                       description="ksy: one Kaitai Struct .ksy file per family (plus "
                                   "<family>.ksy.json listing what Kaitai cannot express). "
                                   "arrow/parquet/jsonl FILE: the file's records, one table "
                                   "per record type (docs/export.md).")
    p.add_argument("target", choices=["ksy", *TABLE_TARGETS], help="the export format")
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="the file to export (arrow, parquet, jsonl)")
    p.add_argument("--out", "-o", default=None,
                   help="ksy: output folder (default ./ksy); arrow/parquet: output folder, "
                        "one file per record type (default FILE.tables); jsonl: output "
                        "file (default standard output)")
    p.add_argument("--family", default=None,
                   help="the file's family (default: detected from its bytes)")
    common.add_project_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.target in TABLE_TARGETS:
        return _tables(args)
    if args.file is not None:
        raise common.UsageError("export ksy takes no FILE (it exports the layouts)")
    proj = common.project(args)
    try:
        proj.activate()  # plug-ins register what the schemas name
        paths = proj.schema_files()
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    result = pipeline.run(paths, proj=proj, render_modules=False)
    errors = [p for p in result.problems if p.severity == "error"]
    if errors:
        raise common.schema_problems(errors)
    out = Path(args.out or "ksy")
    if out.exists() and not out.is_dir():
        raise common.InputError(f"{out}: exists and is not a folder")
    for path, exp in export_ksy.write(result.families, out):
        print(f"wrote {path} ({len(exp.notes)} note(s) on what Kaitai cannot express)")
    return 0


def _tables(args: argparse.Namespace) -> int:
    from ..review import export_table as et

    if args.file is None:
        raise common.UsageError(f"export {args.target} needs a FILE")
    if args.target != "jsonl":
        try:
            et._pyarrow()
        except et.MissingPyarrow as exc:
            raise common.UsageError(str(exc)) from None
    proj = common.project(args)
    with common.real_file(args.file) as path:  # ``-``: standard input
        try:
            decoded = et.decode_file(Path(path), args.family, project=proj)
        except project_mod.ProjectError as exc:
            raise common.project_error(exc) from exc
        except et.ExportError as exc:
            raise common.CliError(str(exc).replace(path, args.file)) from None
    src = Path(args.file if args.file != common.STDIN else "stdin")
    if args.target == "jsonl":
        if args.out in (None, "-"):
            for line in et.jsonl_lines(decoded):
                sys.stdout.write(line + "\n")
            return 0
        with open(args.out, "w", encoding="utf-8") as fh:
            for line in et.jsonl_lines(decoded):
                fh.write(line + "\n")
        print(f"wrote {args.out} ({len(decoded.rows)} records of {decoded.family} "
              f"{decoded.record})")
        return 0
    out = Path(args.out or f"{src}.tables")
    if out.exists() and not out.is_dir():
        raise common.InputError(f"{out}: exists and is not a folder")
    write = et.write_parquet if args.target == "parquet" else et.write_arrow
    counts = decoded.tables()
    for path in write(decoded, out):
        n = len(counts[path.stem])
        print(f"wrote {path} ({n} row{'' if n == 1 else 's'})")
    return 0
