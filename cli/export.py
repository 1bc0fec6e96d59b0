"""``bytewright export ksy``: write the layouts as Kaitai Struct ``.ksy`` files."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..generator import pipeline
from ..generator import project as project_mod
from ..review import export_ksy
from . import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export the layouts to another tool's format (ksy)",
                       description="Write one Kaitai Struct .ksy file per family (plus "
                                   "<family>.ksy.json listing what Kaitai cannot express).")
    p.add_argument("target", choices=["ksy"], help="the export format")
    p.add_argument("--out", default="ksy", help="output folder (default ./ksy)")
    common.add_project_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise common.InputError(f"{out}: exists and is not a folder")
    written = export_ksy.write(result.families, out)
    for path in written:
        if path.suffix == ".ksy":
            meta = export_ksy.export_family(result.families[path.stem])
            print(f"wrote {path} ({len(meta.notes)} note(s) on what Kaitai cannot express)")
    return 0
