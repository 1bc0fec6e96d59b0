"""``bytewright verify PATH...``: decode whole files through the generated decoders.

Each PATH is a file, a folder (every regular file under it, recursively, sorted) or a glob.
Each file's family and top-level record come from the families' ``detect`` rules (the same
ones ``inspect FILE`` uses); the file is then decoded by the generated fast path of that
family, every checksum the layout declares included. One line per file, in input order,
then a summary; exit 1 if any file is bad or unrecognised.

``--jobs N`` decodes files in a pool of N processes: the generated decoders are pure
functions over bytes, so files are independent. Files are mapped (``mmap``) rather than
read, so a file's bytes are paged in by the kernel and shared, not copied.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time
from pathlib import Path
from typing import Any

from ..review.verify import HEAD, decode_buffer, detect, detection_table, verify_many
from . import common

__all__ = ["HEAD", "decode_buffer", "detect", "detection_table", "expand", "register", "run",
           "verify_many"]

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="decode files (folders, globs) through the generated "
                                      "decoders, in parallel with --jobs",
                       description="Detect each file's format and decode it completely "
                                   "with the generated decoders; exit 1 if any is bad.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="files, folders or globs; '-' reads standard input")
    p.add_argument("--jobs", "-j", type=common.positive_int, default=1,
                   help="worker processes (default 1: decode in this process)")
    p.add_argument("--json", action="store_true", help="one JSON document instead of lines")
    common.add_project_arg(p)
    p.set_defaults(func=run)


def expand(paths: list[str]) -> list[str]:
    """Files named by ``paths`` in input order: folders walked (sorted), globs expanded
    (sorted), duplicates kept once. A name matching nothing is an input error."""
    out: list[str] = []
    seen: set[str] = set()
    for raw in paths:
        p = Path(raw)
        if raw == common.STDIN:
            found = [raw]
        elif p.is_dir():
            found = sorted(str(f) for f in p.rglob("*") if f.is_file())
            if not found:
                raise common.InputError(f"{raw}: no file to verify (an empty folder)")
        elif p.exists():
            found = [raw]
        elif glob.has_magic(raw):
            found = sorted(f for f in glob.glob(raw, recursive=True) if os.path.isfile(f))
            if not found:
                raise common.InputError(f"{raw}: the pattern matches no file")
        else:
            raise common.InputError(f"{raw}: no such file or folder")
        for f in found:
            if f not in seen:
                seen.add(f)
                out.append(f)
    return out


_TABLES: dict[str, list[tuple]] = {}  # per project: the detection table, built once


def _table_of(proj: Any) -> list[tuple]:
    """The project's detection table, built once per process and project."""
    from ..review import detect as plain

    key = str(proj.file or proj.root)
    if key not in _TABLES:
        try:  # the generated modules' own plain data: no schema is read
            _TABLES[key] = plain.table(proj)
        except plain.PlainData:
            _TABLES[key] = []
        if not _TABLES[key]:
            from .inspect_file import _project_families

            _TABLES[key] = detection_table(_project_families(proj))
    return _TABLES[key]


def _line(r: dict[str, Any]) -> str:
    what = f"{r['family']}.{r['record']}" if r["family"] else "?"
    if r["ok"]:
        rest = (f" ({r['uncovered']:,} bytes after it not covered by the record's layout)"
                if r.get("uncovered") else "")
        return (f"ok   {r['path']}: {what}, {r['records']:,} record(s), "
                f"{r['bytes']:,} bytes{rest}")
    where = []
    if r.get("offset") is not None:
        where.append(f"offset {r['offset']}")
    if r.get("field"):
        where.append(r["field"])
    return f"BAD  {r['path']}: {what}: {': '.join(where + [r['error']])}"


def _verify(files: list[str], table: list[tuple], jobs: int,
            project_path: str | None) -> list[dict[str, Any]]:
    """``verify_many``, with standard input (``-``) in a temporary file and a progress
    bar on a terminal (in chunks, so the bar moves while files are decoded)."""
    if common.STDIN in files:
        with common.real_file(common.STDIN) as tmp:
            results = _verify([tmp if f == common.STDIN else f for f in files], table, jobs,
                              project_path)
        for r in results:
            if r["path"] == tmp:
                r["path"] = common.STDIN
        return results
    bar = common.progress(len(files), "verify") if len(files) > 1 else None
    if bar is None:
        return verify_many(files, table, jobs, project_path)
    step = max(jobs * 16, len(files) // 50)
    results: list[dict[str, Any]] = []
    try:
        for i in range(0, len(files), step):
            results += verify_many(files[i:i + step], table, jobs, project_path)
            bar.update(len(files[i:i + step]))
    finally:
        bar.close()
    return results


def run(args: argparse.Namespace) -> int:
    proj = common.project(args)
    common.announce(proj, machine=args.json)
    files = expand(args.paths)
    table = _table_of(proj)
    project_path = str(proj.file) if proj.file is not None else None
    t0 = time.perf_counter()
    results = _verify(files, table, args.jobs, project_path)
    wall = time.perf_counter() - t0
    bad = [r for r in results if not r["ok"]]
    for r in bad:  # the reader's words, without codec or class names (docs/cli.md)
        r["error"] = common.plain(r["error"])
    if args.json:
        print(json.dumps({"files": results, "bad": len(bad), "jobs": args.jobs,
                          "seconds": round(wall, 3)}, indent=2))
    else:
        for r in results:
            print(_line(r))
        total = sum(r["bytes"] for r in results)
        print(f"{len(results)} file(s), {len(results) - len(bad)} ok, {len(bad)} bad; "
              f"{total:,} bytes in {wall:.2f} s with --jobs {args.jobs}")
    if bad:
        first = bad[0]
        what = f"{first['family']}.{first['record']}: " if first["family"] else ""
        field = f"{first['field']}: " if first.get("field") else ""
        common.report(args, f"{common.where(first['path'], first.get('offset'))}: {what}"
                            f"{field}{first['error']}"
                            + (f" (and {len(bad) - 1} more bad file(s))" if len(bad) > 1
                               else ""))
    return common.EXIT_FINDINGS if bad else common.EXIT_OK
