"""``bytewright inspect FILE``: the one-argument form (detect the format, show the tree).

Kept apart from ``cli/inspect.py`` (which parses arguments and keeps the older
``inspect FAMILY RECORD FILE`` form): this module opens the input, picks the family and
record (``--format/--record``, a fixture's own header, or the families' ``detect`` rules),
runs ``review.inspector`` and prints text, ``--json`` or ``--at OFFSET``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from ..generator import project as project_mod
from ..generator.plan import stream_plan
from ..review import inspect_summary, inspect_walk, inspector
from . import common

PROGRESS_MIN = 4 << 20  # show a progress bar for inputs of at least 4 MiB on a terminal


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", dest="family_opt", metavar="FAMILY",
                   help="the family (default: detected from the bytes)")
    p.add_argument("--record", metavar="RECORD",
                   help="the top-level record (default: detected, or the fixture's)")
    p.add_argument("--at", type=common.non_negative_int, metavar="OFFSET",
                   help="say which record and field cover byte OFFSET")
    p.add_argument("--limit", type=common.positive_int, metavar="N",
                   help="stop after N records (files that are sequences of records)")
    p.add_argument("--full", action="store_true", help="show long byte strings in full")
    p.add_argument("--list", action="store_true",
                   help="list every record and field of a file of many records (a run of "
                        "records, or a store or log holding a list of entries), which is "
                        "otherwise summarised: parts, items by type, errors")
    p.add_argument("--fixture", action="store_true",
                   help="FILE is a hex fixture even without the .hex suffix")


def _open(path: str) -> tuple[BinaryIO, int]:
    """The input as a seekable stream and its size; one-line errors for a missing path,
    a folder or an unreadable file."""
    if path == common.STDIN:
        data = common.read_input(path)  # at most common.STDIN_MAX bytes
        return io.BytesIO(data), len(data)
    p = Path(path)
    if p.is_dir():
        raise common.InputError(f"{p}: is a folder, not a file")
    try:
        f = p.open("rb")
    except OSError as exc:
        raise common.InputError(common.io_message(p, exc)) from exc
    return f, os.fstat(f.fileno()).st_size


def _families(proj: project_mod.Project, head: bytes | None = None,
              args: argparse.Namespace | None = None, fixture: Any = None) -> Any:
    """The families ``inspector.choose`` needs for an input starting with ``head`` (all
    of them without it): picked by the generated modules' own detection data, the IR of
    the one picked loaded from its module (review/detect.py); projects whose modules
    predate that data run the schemas."""
    from ..review import detect

    try:
        proj.activate()
        family = args.family_opt if args is not None else None
        record = args.record if args is not None else None
        record = record or (fixture.record if fixture is not None else None)
        return detect.families_for(proj, head, family=family, record=record)
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    except detect.PlainData:
        pass
    from ..generator import pipeline

    try:
        paths = proj.schema_files()
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    result = pipeline.run(paths, proj=proj, render_modules=False)
    errors = [p for p in result.problems if p.severity == "error"]
    if errors:
        raise common.UsageError(f"the project's schemas have problems: {errors[0]}")
    return result.families


_FAMILIES: dict[tuple, dict] = {}


def _project_families(proj: project_mod.Project) -> dict:
    """``_families``, kept per process while the project's schema files are unchanged:
    inspecting several files (``inspect A B C``, folders) builds the layouts once."""
    try:
        proj.activate()  # every time: a plug-in's error is the project's error
        files = proj.schema_files()
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    stats = []
    for f in files:
        st = f.stat()
        stats.append((str(f), st.st_mtime_ns, st.st_size))
    key = (str(proj.file or proj.root), tuple(stats))
    if key not in _FAMILIES:
        _FAMILIES[key] = _families(proj)
    return _FAMILIES[key]


def _params(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        params = json.loads(text)
    except json.JSONDecodeError as exc:
        raise common.UsageError(f"--params is not JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise common.UsageError("--params must be a JSON object, e.g. '{\"semantic_dims\": 0}'")
    return params


def _progress(size: int, enabled: bool):
    if not enabled or size < PROGRESS_MIN or not sys.stderr.isatty():
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=size, unit="B", unit_scale=True, file=sys.stderr, leave=False,
               desc="inspect")

    def update(pos: int) -> None:
        bar.update(pos - bar.n)

    return update, bar


def _nothing() -> None:
    pass


def run(args: argparse.Namespace, path: str) -> int:
    proj = common.project(args)
    machine = bool(args.json)
    common.announce(proj, machine=machine)
    fixture = None
    # the input first: a missing path or a folder is reported before any layout is built
    if args.fixture or (path != common.STDIN and path.endswith(".hex")):
        from ..review.checks import FixtureFileError, parse_fixture

        data = common.read_input(path)
        try:
            fixture = parse_fixture(Path(path), data.decode("utf-8"))
        except (UnicodeDecodeError, FixtureFileError) as exc:
            why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc
            raise common.Findings(f"{path}: not a hex fixture ({why})") from exc
        stream, size = io.BytesIO(fixture.data), len(fixture.data)
    else:
        stream, size = _open(path)
    try:
        head = stream.read(512)
        stream.seek(0)
        hint = Path(path).parent.name if path != common.STDIN else ""
        families = _families(proj, head, args, fixture)
        try:
            target = inspector.choose(head, families, family=args.family_opt,
                                      record=args.record, fixture=fixture, hint=hint)
        except inspector.InspectError as exc:
            if args.family_opt or args.record:
                raise common.UsageError(str(exc)) from exc
            raise common.Findings(f"{path}: {exc}") from exc
        if args.offset > size:
            raise common.UsageError(f"--offset {args.offset} is past the end of the input "
                                    f"({size} bytes)")
        update, bar = _progress(size, not machine)

        def read(off: int, n: int) -> bytes:
            here = stream.tell()
            stream.seek(off)
            raw = stream.read(n)
            stream.seek(here)
            return raw

        def show(node: inspector.Node) -> None:  # text streams: a record is printed and freed
            text = inspector.render_record(node, read if args.hex else None)
            if bar is not None:
                bar.clear()
            sys.stdout.write(text)

        summary = None if args.list or fixture is not None or args.at is not None or any(
            (args.limit, args.hex, args.full, args.offset)) else inspect_summary.plan_of(
                target, _params(args.params))
        streaming = not args.json and args.at is None and summary is None
        json_stream = bool(args.json) and args.at is None and summary is None
        if streaming:
            sys.stdout.write(inspector.render_head(target.family.name, target.record,
                                                   target.how, size))
        emitted = [0]

        def emit(node: inspector.Node) -> None:  # --json streams too: one record at a time
            sys.stdout.write(("{\"records\": [\n" if not emitted[0] else ",\n")
                             + json.dumps(node.as_dict(), default=str))
            emitted[0] += 1
        plan = None
        if (streaming or json_stream) and not target.repeat and target.then is None \
                and args.offset == 0 and args.limit is None:
            given = {**target.params, **_params(args.params)}
            plan = stream_plan(target.family, target.record)
            if plan is not None and not inspect_walk.walkable(plan, set(given)):
                plan = None
        try:
            if summary is not None:
                summary = inspect_summary.run_target(stream, size, target, proj.load_module,
                                                     summary, progress=update)
                res = summary.result
            elif plan is not None:  # one big record: shown part by part, memory bounded
                mod = proj.load_module(target.family.name)
                sink = inspect_walk.JsonSink() if json_stream else inspect_walk.TextSink(
                    read if args.hex else None, bar.clear if bar is not None else _nothing)
                res = inspect_walk.walk(
                    stream, size, mod, target.family, target.record,
                    inspector.coerce_params(mod, target.family, target.record, given), plan,
                    sink, how=target.how, full=args.full, progress=update)
                emitted[0] += 1
            else:
                res = inspector.run_target(
                    stream, size, target, proj.load_module, _params(args.params),
                    limit=args.limit, full=args.full, offset=args.offset, progress=update,
                    on_record=show if streaming else emit if json_stream else None)
        except inspector.InspectError as exc:
            raise common.UsageError(str(exc)) from exc
        finally:
            if bar is not None:
                bar.close()
        if summary is not None:
            sys.stdout.write(inspect_summary.render_output(summary, target, size, machine))
        elif json_stream:
            # the records went out as they were decoded; the summary closes the object
            rest = res.as_dict()
            del rest["records"]
            opened = "\n],\n" if emitted[0] else "{\"records\": [], "
            sys.stdout.write(opened + json.dumps(rest, default=str)[1:] + "\n")
        elif args.json:
            print(json.dumps(res.as_dict(), indent=2, default=str))
        elif args.at is not None:
            sys.stdout.write(inspector.render_at(res, args.at))
        else:
            sys.stdout.write(inspector.render_tail(res))
    finally:
        stream.close()
    if res.failure is not None:
        f = res.failure
        common.report(args, f"{common.where(path, f.offset)}: "
                            + ": ".join([*([f.path] if f.path else []), f.message]))
    elif res.bad_checksums:
        first = res.bad_checksums[0]
        common.report(args, f"{common.where(path, getattr(first, 'offset', None))}: "
                            f"{len(res.bad_checksums)} checksum mismatch(es), first at "
                            f"{first.path}")
    return 0 if res.ok else common.EXIT_FINDINGS
