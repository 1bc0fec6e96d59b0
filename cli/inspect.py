"""``bytewright inspect``: decode any file (or hex fixture) as a record, field by field."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import glob
import inspect
import io
import json
import sys
from pathlib import Path
from typing import Any

from ..generator import project as project_mod
from ..runtime.errors import BytewrightError
from . import common, inspect_file, verify


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect", help="decode a file field by field (the format is detected from the bytes)",
        description="inspect FILE detects the family and top-level record from the bytes "
                    "(each schema's detect: rule) or a .hex fixture's header, and shows every "
                    "record and field with offset, size, path, value and checksum status; a "
                    "file of many records is summarised (--list shows every field). "
                    "The older form inspect FAMILY RECORD FILE decodes one record as the "
                    "object model. Exit 1 on corrupt input (after showing what decoded).")
    p.add_argument("target", nargs="+", metavar="FILE",
                   help="FILE (binary, .hex fixture, or - for standard input), or FAMILY "
                        "RECORD FILE (the older form; RECORD 'auto' for a .hex fixture)")
    p.add_argument("--params", default="{}", help="record params as a JSON object")
    p.add_argument("--offset", type=common.non_negative_int, default=0,
                   help="byte offset to decode at (>= 0)")
    p.add_argument("--hex", action="store_true",
                   help="show the raw bytes of every field under it (FILE form)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--construct", action="store_true",
                   help="FAMILY RECORD FILE form: decode with the Construct path")
    p.add_argument("--jobs", type=common.positive_int, default=1, metavar="N",
                   help="FILE form over several files, folders or globs: N processes "
                        "(outputs are printed in input order)")
    inspect_file.add_arguments(p)
    common.add_project_arg(p)
    p.set_defaults(func=run)


def plain(value: Any) -> Any:
    """The object model as JSON-ready data (bytes as hex, enums by name)."""
    if dataclasses.is_dataclass(value):
        return {"_type": type(value).__name__,
                **{f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    return value


def show(value: Any, indent: int = 0, name: str = "") -> None:
    pad = "  " * indent
    label = f"{name}: " if name else ""
    if dataclasses.is_dataclass(value):
        print(f"{pad}{label}{type(value).__name__}")
        for f in dataclasses.fields(value):
            show(getattr(value, f.name), indent + 1, f.name)
    elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
        print(f"{pad}{label}[{len(value)} items]")
        for i, v in enumerate(value):
            show(v, indent + 1, f"[{i}]")
    elif isinstance(value, (bytes, bytearray)):
        text = value[:48].hex() + ("…" if len(value) > 48 else "")
        print(f"{pad}{label}{len(value)} bytes {text}")
    else:
        print(f"{pad}{label}{value!r}")


def _params(text: str) -> dict[str, Any]:
    try:
        params = json.loads(text)
    except json.JSONDecodeError as exc:
        raise common.UsageError(f"--params is not JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise common.UsageError("--params must be a JSON object, e.g. '{\"dims\": 4}'")
    return params


def _check_params(mod: Any, family: str, record: str, params: dict[str, Any]) -> None:
    """Names must be the record's params and values plain JSON scalars."""
    try:
        sig = inspect.signature(mod.DECODERS[record])
    except (TypeError, ValueError):
        return
    kw = [p for p in sig.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    known = [p.name for p in kw]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise common.UsageError(f"{family}.{record} takes no param(s) {', '.join(unknown)}; "
                                f"params: {', '.join(known) or '(none)'}")
    missing = [p.name for p in kw if p.default is inspect.Parameter.empty
               and p.name not in params]
    if missing:
        raise common.UsageError(f"{family}.{record} needs --params for: {', '.join(missing)}")
    for k, v in params.items():
        if not isinstance(v, (int, str)) or isinstance(v, float):
            raise common.UsageError(f"--params {k}: expected an integer, bool or name, "
                                    f"not {json.dumps(v)}")


def _fixture(args: argparse.Namespace):
    from ..review.checks import FixtureFileError, parse_fixture

    data = common.read_input(args.file)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    try:
        if text is None:
            raise FixtureFileError(f"{args.file}: not a hex fixture (not UTF-8 text)")
        return parse_fixture(Path(args.file), text)
    except FixtureFileError as exc:
        raise common.Findings(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    targets = args.target
    if len(targets) == 3 and not Path(targets[0]).exists() and not glob.has_magic(targets[0]):
        args.family, args.record, args.file = targets
        return run_record(args)
    if len(targets) == 1 and (targets[0] == common.STDIN or (
            Path(targets[0]).is_file() and args.jobs == 1)):
        return inspect_file.run(args, targets[0])
    files = verify.expand(targets)
    if not files:
        raise common.InputError(f"{' '.join(targets)}: no file to inspect (an empty folder)")
    return run_many(args, files)


def _inspect_one(args: argparse.Namespace, path: str) -> tuple[int, str, str]:
    """One file of a multi-file inspect: (exit code, stdout, stderr), errors as the
    one line the command would print for that file alone."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = inspect_file.run(args, path)
        except Exception as exc:  # noqa: BLE001 - reported per file, as main() would
            code = common.exit_code(exc)
            common.report(args, common.describe(exc, path))
    return code, out.getvalue(), err.getvalue()


def run_many(args: argparse.Namespace, files: list[str]) -> int:
    """Inspect every file (the FILE form), in ``--jobs`` processes; each file's output
    under a ``== FILE`` line, in input order; the exit code is the worst of them."""
    worst = 0
    if args.jobs > 1 and len(files) > 1:
        from concurrent.futures import ProcessPoolExecutor  # only for --jobs: a cost

        with ProcessPoolExecutor(max_workers=min(args.jobs, len(files))) as pool:
            results = pool.map(_inspect_one, [args] * len(files), files)
            for path, (code, out, err) in zip(files, results, strict=True):
                worst = max(worst, _show(path, code, out, err, args.json))
        return worst
    for path in files:
        worst = max(worst, _show(path, *_inspect_one(args, path), args.json))
    return worst


def _show(path: str, code: int, out: str, err: str, machine: bool) -> int:
    """One file's output: text under a ``== FILE`` line; with ``--json`` one line per
    file (JSON Lines), its document with the path and exit code added."""
    if machine:
        try:
            doc = json.loads(out) if out.strip() else {}
        except json.JSONDecodeError:
            doc = {"output": out}
        lines = [x for x in err.splitlines() if not x.startswith("project: ")]
        if code and lines and "error" not in doc:
            doc["error"] = lines[-1]
        sys.stdout.write(json.dumps({"path": path, "exit": code, **doc}) + "\n")
    else:
        sys.stdout.write(f"== {path}\n" + out)
        sys.stderr.write(err)
    sys.stdout.flush()
    return code


def run_record(args: argparse.Namespace) -> int:
    """The older form: FAMILY RECORD FILE, the object model as decoded."""
    proj = common.project(args)
    common.announce(proj, machine=args.json)
    if not args.family.isidentifier() or not proj.module_path(args.family).is_file():
        families = sorted(p.stem for p in proj.output.glob("*.py") if p.stem != "__init__")
        raise common.UsageError(f"no generated family {args.family!r} in {proj.name}; "
                                f"families: {', '.join(families) or '(none: run generate)'}")
    try:
        mod = proj.load_module(args.family)
    except project_mod.ProjectError as exc:
        raise common.project_error(exc) from exc
    params = _params(args.params)
    record = args.record
    if args.fixture or (args.file != common.STDIN and args.file.endswith(".hex")):
        fx = _fixture(args)
        data, params = fx.data, {**fx.params, **params}
        record = fx.record if record == "auto" else record
    else:
        data = common.read_input(args.file)
    if record not in mod.DECODERS:
        raise common.UsageError(f"{args.family} has no record {record!r}; records: "
                                f"{', '.join(mod.DECODERS)}")
    _check_params(mod, args.family, record, params)
    if args.offset > len(data):
        raise common.UsageError(f"--offset {args.offset} is past the end of the input "
                                f"({len(data)} bytes)")
    try:
        if args.construct:
            value, end = mod.CONSTRUCT_DECODERS[record](data, args.offset, **params), None
        else:
            value, end = mod.DECODERS[record](data, args.offset, **params)
    except BytewrightError as exc:
        common.report(args, common.describe(exc, args.file))
        return common.EXIT_FINDINGS
    except Exception as exc:
        if not params:
            raise  # no caller-supplied values to blame: a real bug, reported as one
        # Values the record was not written for (a string where an int goes, an enum
        # value it does not know) fail inside the generated code.
        raise common.UsageError(f"--params {json.dumps(params)} do not fit "
                                f"{args.family}.{record}: {type(exc).__name__}: {exc}") from exc
    if args.json:
        print(json.dumps({"record": record, "end": end, "size": len(data),
                          "value": plain(value)}, indent=2))
    else:
        show(value, name=record)
        if end is not None:
            print(f"-- decoded {end - args.offset} of {len(data) - args.offset} bytes")
    return 0
