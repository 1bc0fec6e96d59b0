"""``bytewright inspect``: decode any file (or hex fixture) as a record, field by field."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from ..generator.checks import parse_fixture
from ..runtime.errors import DecodeError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="decode a file as a record and show every field")
    p.add_argument("family", help="generated family, e.g. htt")
    p.add_argument("record", help="record name, e.g. htt_file (or 'auto' for a .hex fixture)")
    p.add_argument("file", type=Path, help="binary file, or a fixtures .hex file")
    p.add_argument("--params", default="{}", help="record params as JSON")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--construct", action="store_true", help="decode with the Construct path")
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


def run(args: argparse.Namespace) -> int:
    try:
        mod = importlib.import_module(f"bytewright.generated.{args.family}")
    except ModuleNotFoundError:
        print(f"inspect: no generated family {args.family!r}", file=sys.stderr)
        return 2
    params = json.loads(args.params)
    record = args.record
    if args.file.suffix == ".hex":
        fx = parse_fixture(args.file)
        data, params = fx.data, {**fx.params, **params}
        record = fx.record if record == "auto" else record
    else:
        data = args.file.read_bytes()
    if record not in mod.DECODERS:
        print(f"inspect: {args.family} has no record {record!r}; records: "
              f"{', '.join(mod.DECODERS)}", file=sys.stderr)
        return 2
    try:
        if args.construct:
            value, end = mod.CONSTRUCT_DECODERS[record](data, args.offset, **params), None
        else:
            value, end = mod.DECODERS[record](data, args.offset, **params)
    except DecodeError as exc:
        print(f"{args.file}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"record": record, "end": end, "size": len(data),
                          "value": plain(value)}, indent=2))
    else:
        show(value, name=record)
        if end is not None:
            print(f"-- decoded {end - args.offset} of {len(data) - args.offset} bytes")
    return 0
