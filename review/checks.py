"""What ``bytewright check`` runs: generated-code drift, then every golden fixture.

Fixtures are ``fixtures/<family>/*.hex``: whitespace-insensitive hex, ``#`` comments, and
``#: key: value`` directives naming the record (``#: record: htt_file``) and its params
as JSON (``#: params: {"semantic_dims": 20}``). Each fixture must decode, re-encode
byte-identically, and give the same value through the fast path and the Construct path
(interpreted and compiled).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from ..generator import ir, pipeline, project
from ..generator.problems import Problems
from ..runtime.errors import BytewrightError
from . import check_cache
from .check_cache import CheckCache
from .diff import drift_records


def _package_fixtures() -> Path:
    try:
        return project.package_project().fixtures or pipeline.PACKAGE_ROOT / "fixtures"
    except project.ProjectError:
        return pipeline.PACKAGE_ROOT / "fixtures"


# The package's own fixtures (kept for callers that predate projects).
FIXTURE_DIR = _package_fixtures()


class FixtureFileError(ValueError):
    """A ``.hex`` fixture file that cannot be parsed; the message is one line."""


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


def parse_fixture(path: Path, text: str | None = None) -> Fixture:
    """Parse a fixture file (or its ``text``); ``FixtureFileError`` names what is wrong."""
    if text is None:
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FixtureFileError(f"{path}: not a hex fixture (not UTF-8 text at byte "
                                   f"{exc.start})") from exc
    meta: dict[str, str] = {}
    docs: list[str] = []
    hexpart: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            key, _, value = stripped[2:].partition(":")
            meta[key.strip()] = value.strip()
        elif stripped.startswith("#"):
            docs.append(stripped[1:].strip())
        else:
            hexpart.append(stripped.split("#", 1)[0])
    digits = re.sub(r"\s+", "", "".join(hexpart))
    if "record" not in meta:
        raise FixtureFileError(f"{path}: not a hex fixture: missing '#: record: NAME' directive")
    try:
        params = json.loads(meta.get("params", "{}"), object_hook=_bytes_param)
    except json.JSONDecodeError as exc:
        raise FixtureFileError(f"{path}: '#: params:' is not JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise FixtureFileError(f"{path}: '#: params:' must be a JSON object")
    bad = re.search(r"[^0-9a-fA-F]", digits)
    if bad:
        raise FixtureFileError(f"{path}: not hex: {bad.group()!r} in the byte lines")
    if len(digits) % 2:
        raise FixtureFileError(f"{path}: odd number of hex digits ({len(digits)})")
    return Fixture(path=path, family=path.parent.name, record=meta["record"],
                   params=params, data=bytes.fromhex(digits), doc=" ".join(docs))


def _bytes_json(value: object) -> dict:
    """A ``bytes`` param in a fixture's JSON line: ``{"hex": "..."}``."""
    if isinstance(value, bytes | bytearray):
        return {"hex": bytes(value).hex()}
    raise TypeError(f"a fixture param of type {type(value).__name__} has no JSON form")


def _bytes_param(obj: dict) -> object:
    return bytes.fromhex(obj["hex"]) if set(obj) == {"hex"} else obj


def fixture_text(record: str, params: dict, data: bytes, doc: str) -> str:
    """The canonical text of a fixture file (32 bytes a line)."""
    lines = [f"# {line}" for line in doc.splitlines()] if doc else []
    lines.append(f"#: record: {record}")
    lines.append(f"#: params: {json.dumps(params, sort_keys=True, default=_bytes_json)}")
    for i in range(0, len(data), 32):
        chunk = data[i:i + 32].hex()
        lines.append(" ".join(chunk[j:j + 8] for j in range(0, len(chunk), 8)))
    return "\n".join(lines) + "\n"


def fixture_paths(family: str | None = None, fixture_dir: Path | None = None) -> list[Path]:
    root = FIXTURE_DIR if fixture_dir is None else fixture_dir
    return [p for p in sorted(root.glob("*/*.hex"))
            if family is None or p.parent.name == family]


def fixtures(family: str | None = None, fixture_dir: Path | None = None) -> list[Fixture]:
    """Every fixture under ``fixture_dir`` (default: the package's own fixtures)."""
    return [parse_fixture(p) for p in fixture_paths(family, fixture_dir)]


def _package_module(family: str) -> ModuleType:
    return project.package_project().load_module(family)


def check_fixture(fx: Fixture, *, compiled: bool = True,
                  module: Callable[[str], ModuleType] | None = None) -> FixtureResult:
    """Run one fixture through both paths; ``module(family)`` finds the generated code."""
    res = FixtureResult(fx, False, len(fx.data))
    try:
        mod = (module or _package_module)(fx.family)
        if fx.record not in mod.DECODERS:
            raise LookupError(f"family {fx.family} has no record {fx.record!r}")
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


def module_drift(name: str, text: str, generated_dir: Path,
                 family: ir.Family | None = None) -> Drift | None:
    """How the checked-in ``generated_dir/name`` differs from ``text`` (None: it does not)."""
    label = generated_dir.name
    path = generated_dir / name
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if old == text:
        return None
    diff = "".join(difflib.unified_diff(
        old.splitlines(keepends=True), text.splitlines(keepends=True),
        fromfile=f"{label}/{name} (checked in)", tofile=f"{label}/{name} (from schemas)"))
    return Drift(name, diff, drift_records(old, family))  # records from the layouts (IR)


def drift(result: pipeline.Result, generated_dir: Path | None = None) -> list[Drift]:
    """Modules whose checked-in text differs from a fresh generation."""
    generated_dir = generated_dir or pipeline.GENERATED_DIR
    label = generated_dir.name
    out = []
    for name, text in sorted(result.modules.items()):
        found = module_drift(name, text, generated_dir, result.families.get(name[:-3]))
        if found is not None:
            out.append(found)
    for path in orphans(result, generated_dir):
        out.append(Drift(path.name, f"{label}/{path.name} has no schema any more\n", []))
    return out


@dataclass
class FamilyDrift:
    """The drift check of one family: ``drift`` None when the module is up to date;
    ``cached`` when that was known from an earlier check of the very same inputs."""

    family: str
    module: str
    drift: Drift | None
    cached: bool = False
    missing: bool = False  # the module was never generated


def family_drift(family: ir.Family, generated_dir: Path, problems: Problems,
                 cache: CheckCache | None = None, context: str = "",
                 progress: Callable[[str], None] | None = None) -> FamilyDrift:
    """Compare ``family``'s checked-in module with a fresh emission, unless ``cache``
    knows these exact inputs (schema sources, generator, plug-ins, module bytes) were
    found free of drift. Emission problems go to ``problems``; ``progress`` is told
    when the (slow) emission starts."""
    name = f"{family.name}.py"
    path = generated_dir / name
    key = check_cache.family_key(family, path, context) if cache is not None else ""
    if cache is not None and cache.hit(family.name, key):
        return FamilyDrift(family.name, name, None, cached=True)
    if progress is not None:
        progress(f"generating {name}")
    own = Problems()
    text = pipeline.render(family, own)
    problems.extend(own)
    found = module_drift(name, text, generated_dir, family)
    if cache is not None:
        if found is None and not own:
            cache.remember(family.name, key)
        else:
            cache.forget(family.name)
    return FamilyDrift(family.name, name, found, missing=found is not None and not path.is_file())


def orphan_drifts(families: Collection[str], generated_dir: Path) -> list[Drift]:
    """A drift for every generated module no family of the project produces any more."""
    result = pipeline.Result(modules={f"{f}.py": "" for f in families})
    return [Drift(p.name, f"{generated_dir.name}/{p.name} has no schema any more\n", [])
            for p in orphans(result, generated_dir)]


GENERATED_HEADER = "# Generated by bytewright from "


def orphans(result: pipeline.Result, generated_dir: Path) -> list[Path]:
    """Modules in ``generated_dir`` that bytewright generated (by their header) and no
    schema of ``result`` produces any more; hand-written files are never among them."""
    out = []
    for path in sorted(generated_dir.glob("*.py")):
        if path.name in result.modules or path.name == "__init__.py":
            continue
        try:
            with path.open(encoding="utf-8") as fh:
                head = fh.readline()
        except (OSError, UnicodeDecodeError):
            continue
        if head.startswith(GENERATED_HEADER):
            out.append(path)
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
