"""What ``bytewright check`` runs: generated-code drift, then every golden fixture.

Fixtures are ``fixtures/<family>/*.hex``: whitespace-insensitive hex, ``#`` comments, and
``#: key: value`` directives naming the record (``#: record: htt_file``) and its params
as JSON (``#: params: {"semantic_dims": 20}``). Each fixture must decode, re-encode
byte-identically, and give the same value through the fast path and the Construct path
(interpreted and compiled).
"""

from __future__ import annotations

import difflib
import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.errors import BytewrightError
from . import pipeline

FIXTURE_DIR = pipeline.PACKAGE_ROOT / "fixtures"


@dataclass
class Fixture:
    path: Path
    family: str
    record: str
    params: dict
    data: bytes
    doc: str = ""


@dataclass
class FixtureResult:
    fixture: Fixture
    ok: bool
    size: int
    checks: dict[str, bool] = field(default_factory=dict)
    error: str = ""


def parse_fixture(path: Path) -> Fixture:
    meta: dict[str, str] = {}
    docs: list[str] = []
    hexpart: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            key, _, value = stripped[2:].partition(":")
            meta[key.strip()] = value.strip()
        elif stripped.startswith("#"):
            docs.append(stripped[1:].strip())
        else:
            hexpart.append(stripped.split("#", 1)[0])
    text = re.sub(r"\s+", "", "".join(hexpart))
    if "record" not in meta:
        raise ValueError(f"{path}: missing '#: record: NAME' directive")
    return Fixture(path=path, family=path.parent.name, record=meta["record"],
                   params=json.loads(meta.get("params", "{}")), data=bytes.fromhex(text),
                   doc=" ".join(docs))


def fixture_text(record: str, params: dict, data: bytes, doc: str) -> str:
    """The canonical text of a fixture file (32 bytes a line)."""
    lines = [f"# {line}" for line in doc.splitlines()] if doc else []
    lines.append(f"#: record: {record}")
    lines.append(f"#: params: {json.dumps(params, sort_keys=True)}")
    for i in range(0, len(data), 32):
        chunk = data[i:i + 32].hex()
        lines.append(" ".join(chunk[j:j + 8] for j in range(0, len(chunk), 8)))
    return "\n".join(lines) + "\n"


def fixtures(family: str | None = None) -> list[Fixture]:
    out = []
    for path in sorted(FIXTURE_DIR.glob("*/*.hex")):
        if family is None or path.parent.name == family:
            out.append(parse_fixture(path))
    return out


def check_fixture(fx: Fixture, *, compiled: bool = True) -> FixtureResult:
    mod = importlib.import_module(f"bytewright.generated.{fx.family}")
    res = FixtureResult(fx, False, len(fx.data))
    try:
        value, end = mod.DECODERS[fx.record](fx.data, **fx.params)
        res.checks["decode"] = end == len(fx.data)
        res.checks["re-encode"] = mod.ENCODERS[fx.record](value, **fx.params) == fx.data
        cvalue = mod.CONSTRUCT_DECODERS[fx.record](fx.data, **fx.params)
        res.checks["construct"] = cvalue == value
        if compiled:
            cc = mod.CONSTRUCT_DECODERS[fx.record](fx.data, compiled=True, **fx.params)
            res.checks["compiled"] = cc == value
        res.checks["construct-encode"] = mod.CONSTRUCT_ENCODERS[fx.record](
            value, **fx.params) == fx.data
    except BytewrightError as exc:
        res.error = str(exc)
    except Exception as exc:  # report, don't crash the whole check
        res.error = f"{type(exc).__name__}: {exc}"
    res.ok = not res.error and all(res.checks.values())
    return res


@dataclass
class Drift:
    module: str
    diff: str
    records: list[str]


def drift(result: pipeline.Result, generated_dir: Path | None = None) -> list[Drift]:
    """Modules whose checked-in text differs from a fresh generation."""
    generated_dir = generated_dir or pipeline.GENERATED_DIR
    out = []
    expected = set(result.modules)
    for name, text in sorted(result.modules.items()):
        path = generated_dir / name
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old == text:
            continue
        diff = "".join(difflib.unified_diff(
            old.splitlines(keepends=True), text.splitlines(keepends=True),
            fromfile=f"generated/{name} (checked in)", tofile=f"generated/{name} (from schemas)"))
        family = result.families.get(name[:-3])
        out.append(Drift(name, diff, changed_records(old, text, family)))
    for path in sorted(generated_dir.glob("*.py")):
        if path.name != "__init__.py" and path.name not in expected:
            out.append(Drift(path.name, f"generated/{path.name} has no schema any more\n", []))
    return out


_OWNER = re.compile(r"^(?:def _[de]_(\w+?)(?:_v\d+)?\(|def (?:construct_)?(?:de|en)code_(\w+)\(|"
                    r"C_(\w+) = |def _(?:c2m|m2c)_(\w+)\(|class (\w+)[:(])")


def changed_records(old: str, new: str, family) -> list[str]:
    """Names of records whose generated code changed (for a readable drift message)."""
    if family is None:
        return []
    names = set(family.records)
    by_class = {r.class_name: r.name for r in family.records.values()}
    found: set[str] = set()
    for text, other in ((new, old), (old, new)):
        lines = text.splitlines()
        other_set = set(other.splitlines())
        owner = None
        for line in lines:
            m = _OWNER.match(line)
            if m:
                name = next(g for g in m.groups() if g)
                owner = by_class.get(name, name)
            elif line.startswith(("    '", "LAYOUT", "{'")) and line.strip().startswith("'") \
                    and line.strip().rstrip(":").strip("'") in names:
                owner = line.strip().split("'")[1]
            if line not in other_set and owner in names:
                found.add(owner)
    return sorted(found)
