"""Records as data: a file decoded into one table per record type (Arrow, Parquet, JSONL).

The file's family and top-level record come from the families' ``detect`` rules, exactly
as ``verify`` finds them (``review/verify.py``). The file is then walked by the record's
streaming plan (``generator/plan.py``) when it has one: each part the plan decodes whole
(an HTT file header, a WAL header) and each item of a ``repeat: eos`` (a WAL entry, a ZE
WAL frame) becomes one row of the table named after its record type, with its absolute
``_offset`` and ``_size``. A record without a plan is one row. A file that is a run of
records (``repeat``/``then`` rules) gives one row per record.

Columns: ``_offset``, ``_size``, ``_checksum``, then the record's fields, nested records
flattened into dotted paths (``body.key``, ``header.flags.compressed``). Lists stay one
value: a list column (items of nested records become structs). Enum values are their
member names; flags are one boolean column per bit. A column whose values have no common
Arrow type (a switch holding different kinds of value, integers beyond 64 bits) is
written as text (JSON for lists and structs).

``_checksum`` is ``none`` when the record's layout declares no checksum, ``ok`` when every
declared checksum matched, ``bad`` when a stored checksum did not match: the row is
still decoded, from a copy of its bytes carrying the computed checksum. Bytes that do not decode for any other reason end the
export with one line naming the offset.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from pathlib import Path
from typing import Any

from ..generator.plan import eval_expr, stream_plan
from ..runtime.errors import BytewrightError, ChecksumError, DecodeError
from . import verify

INSTALL_HINT = "pip install 'bytewright[tables]'"
_BAD_TRIES = 8  # checksums patched per record before giving up (a record holds a few)


class ExportError(BytewrightError):
    """A file that cannot be exported (unrecognised, or bytes that do not decode)."""


class MissingPyarrow(ExportError):
    """pyarrow is not installed (it is the optional ``tables`` extra)."""


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise MissingPyarrow(f"pyarrow is not installed: {INSTALL_HINT}") from None
    return pyarrow


# -- the project: families (for detection and layouts) and generated modules -------------

_CACHE: dict[str, tuple[Any, dict[str, Any], list[tuple]]] = {}


def _context(project: Any = None) -> tuple[Any, dict[str, Any], list[tuple]]:
    """(project, families, detection table), built once per process and project:
    loading and validating the schemas is the slow part."""
    from ..generator import pipeline
    from ..generator import project as project_mod

    proj = project if isinstance(project, project_mod.Project) else \
        project_mod.resolve(project)
    key = str(proj.file or proj.root)
    if key not in _CACHE:
        proj.activate()
        result = pipeline.run(proj.schema_files(), proj=proj, render_modules=False)
        errors = [p for p in result.problems if p.severity == "error"]
        if errors:
            raise ExportError(f"the project's schemas have problems: {errors[0]}")
        _CACHE[key] = (proj, result.families, verify.detection_table(result.families))
    return _CACHE[key]


# -- values to columns -----------------------------------------------------------------

def _plain(v: Any) -> Any:
    """A decoded value as plain Python (what Arrow and JSON take)."""
    if isinstance(v, enum.Enum):  # before int: most enums are IntEnums
        return v.name
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if hasattr(v, "tolist"):  # numpy arrays and scalars
        return _plain(v.tolist())
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)


def flatten(value: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """A decoded record as ``{dotted path: plain value}``; lists are one value."""
    out = {} if out is None else out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            flatten(getattr(value, f.name), f"{prefix}{f.name}.", out)
    else:
        out[prefix[:-1] if prefix else "value"] = _plain(value)
    return out


# -- walking a file ------------------------------------------------------------------------

@dataclasses.dataclass
class Decoded:
    """A decoded file: its family, top-level record and rows in file order."""

    family: str
    record: str
    rows: list[tuple[str, dict[str, Any]]]  # (record type, row)

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for name, row in self.rows:
            out.setdefault(name, []).append(row)
        return out


class _Walker:
    def __init__(self, fam: Any, mod: Any, buf: bytes) -> None:
        self.fam, self.mod, self.buf = fam, mod, buf
        self.rows: list[tuple[str, dict[str, Any]]] = []
        self._summed: dict[str, bool] = {}

    def has_checksum(self, name: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether record ``name`` declares a checksum, itself or in a record it holds."""
        if name in self._summed:
            return self._summed[name]
        from ..generator import ir

        rec = self.fam.records.get(name)
        found = False
        for f in rec.fields if rec is not None and name not in seen else ():
            t = f.type
            targets = ([t.target] if isinstance(t, ir.RefT) and t.kind == "record" else
                       [c[2] for c in t.cases if c[2]] if isinstance(t, ir.SwitchT) else [])
            if f.checksum is not None or any(self.has_checksum(x, seen | {name})
                                             for x in targets):
                found = True
                break
        self._summed[name] = found
        return found

    def decode(self, target: str, pos: int, args: dict[str, Any]) -> tuple[Any, int]:
        """Decode one ``target`` at ``pos`` and add its row. A checksum mismatch is
        decoded again from a copy carrying the computed checksum (the row says ``bad``)."""
        dec = getattr(self.mod, f"decode_{target}")
        bad = False
        buf = self.buf
        for _ in range(_BAD_TRIES):
            try:
                value, end = dec(buf, pos, **args)
                break
            except ChecksumError as exc:
                patched = _patch(buf, exc)
                if patched is None:
                    raise
                buf, bad = patched, True
        else:
            raise ExportError(f"offset {pos}: {target}: too many bad checksums")
        row = flatten(value)
        status = "bad" if bad else ("ok" if self.has_checksum(target) else "none")
        self.rows.append((target, {"_offset": pos, "_size": end - pos, "_checksum": status,
                                   **row}))
        return value, end

    def walk(self, plan: tuple, pos: int, params: dict[str, Any]) -> int:
        """Rows of the parts of a record with a streaming plan (as ``verify`` walks it)."""
        defaults, fields = plan
        env = {**defaults, **params}
        end = len(self.buf)
        for name, mode, target, cond, arg_src, sub in fields:
            if cond is not None and not eval_expr(cond, env):
                env[name] = None
                continue
            args = {k: eval_expr(src, env) for k, src in arg_src}
            if mode == "whole":
                env[name], pos = self.decode(target, pos, args)
            elif mode == "stream":
                pos = self.walk(sub, pos, args)
                env[name] = None
            else:
                while pos < end:
                    _, nxt = self.decode(target, pos, args)
                    if nxt <= pos:
                        raise ExportError(f"offset {pos}: {target}: an item of no size")
                    pos = nxt
                env[name] = None
        return pos

    def record(self, name: str, pos: int, params: dict[str, Any]) -> int:
        plan = stream_plan(self.fam, name)
        if plan is not None:
            return self.walk(plan, pos, params)
        return self.decode(name, pos, params)[1]


def _patch(buf: bytes | bytearray, exc: ChecksumError) -> bytearray | None:
    """``buf`` with the stored checksum at ``exc.offset`` replaced by the computed one, or
    None when the stored bytes are not recognisable as ``exc.found``."""
    at, want, have = exc.offset, exc.expected, exc.found
    if at is None or want is None or have is None or want == have:
        return None
    if isinstance(have, int) and isinstance(want, int):
        for n in (4, 8, 2, 1):
            for order in ("little", "big"):
                raw = bytes(buf[at:at + n])
                if len(raw) == n and int.from_bytes(raw, order) == have \
                        and 0 <= want < 1 << (8 * n):
                    out = bytearray(buf)
                    out[at:at + n] = want.to_bytes(n, order)
                    return out
        return None
    if isinstance(have, (bytes, bytearray)) and isinstance(want, (bytes, bytearray)) \
            and len(have) == len(want) and bytes(buf[at:at + len(have)]) == bytes(have):
        out = bytearray(buf)
        out[at:at + len(want)] = want
        return out
    return None


def decode_file(data: bytes | str | Path, family: str | None = None, *,
                project: Any = None, name: str | None = None) -> Decoded:
    """Detect ``data``'s family (or use ``family``) and decode it into rows."""
    if isinstance(data, (str, Path)):
        name = name or str(data)
        try:
            data = Path(data).read_bytes()
        except OSError as exc:
            raise ExportError(f"{name}: {exc.strerror or exc}") from None
    name = name or "<bytes>"
    buf = bytes(data)
    proj, families, table = _context(project)
    if family is not None:
        if family not in families:
            raise ExportError(f"no family {family!r} (known: {', '.join(sorted(families))})")
        table = [row for row in table if row[2] == family]
    found = verify.detect(buf[:verify.HEAD], table)
    if found is None:
        raise ExportError(f"{name}: no family recognises these bytes ({buf[:16].hex()})")
    _, _, fam_name, record, params, repeat, then = found[:7]
    fam = families[fam_name]
    from . import inspector

    mod = proj.load_module(fam_name)
    walker = _Walker(fam, mod, buf)
    try:
        params = inspector.coerce_params(mod, fam, record, dict(params))
        pos = walker.record(record, 0, params)
        if repeat or then:
            nxt, args = (then, {}) if then else (record, params)
            while pos < len(buf):
                pos = walker.record(nxt, pos, args)
    except DecodeError as exc:
        where = f"offset {exc.offset}" if exc.offset is not None else "an unknown offset"
        what = f"{exc.path}: " if exc.path else ""
        detail = exc.message
        if exc.expected is not None or exc.found is not None:
            detail += f" (expected {exc.expected!r}, found {exc.found!r})"
        raise ExportError(f"{name}: {fam_name} {record} does not decode at {where}: "
                          f"{what}{detail}".replace("\n", " ")) from None
    return Decoded(fam_name, record, walker.rows)


# -- outputs -------------------------------------------------------------------------------

def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    """Every column of ``rows`` in first-seen order, less a column that is always empty
    and names a record others flatten (a conditional record absent in some rows)."""
    cols: dict[str, None] = {}
    for row in rows:
        cols.update(dict.fromkeys(row))
    out = []
    for c in cols:
        if any(k.startswith(c + ".") for k in cols) and all(r.get(c) is None for r in rows):
            continue
        out.append(c)
    return out


def _array(pa: Any, values: list[Any]) -> Any:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError,
            TypeError, ValueError):
        # no common Arrow type: text (JSON for lists and structs, bytes as hex)
        return pa.array([None if v is None else v if isinstance(v, str) else
                         json.dumps(_jsonable(v)) if isinstance(v, (list, dict)) else
                         v.hex() if isinstance(v, bytes) else str(v) for v in values],
                        type=pa.string())


def tables_of(decoded: Decoded) -> dict[str, Any]:
    """``{record type: pyarrow.Table}`` of a decoded file."""
    pa = _pyarrow()
    out = {}
    for rec, rows in decoded.tables().items():
        cols = _columns(rows)
        out[rec] = pa.table({c: _array(pa, [r.get(c) for r in rows]) for c in cols})
    return out


def to_arrow(path_or_bytes: bytes | str | Path, family: str | None = None, *,
             project: Any = None) -> dict[str, Any]:
    """Decode a file into ``{record type: pyarrow.Table}`` (see the module's doc)."""
    _pyarrow()  # fail before decoding when the extra is missing
    return tables_of(decode_file(path_or_bytes, family, project=project))


def write_parquet(decoded: Decoded, out: Path) -> list[Path]:
    """One ``<record type>.parquet`` per record type in the folder ``out``."""
    _pyarrow()
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rec, tbl in tables_of(decoded).items():
        path = out / f"{rec}.parquet"
        pq.write_table(tbl, path)
        written.append(path)
    return written


def write_arrow(decoded: Decoded, out: Path) -> list[Path]:
    """One ``<record type>.arrow`` (Arrow IPC file) per record type in the folder ``out``."""
    pa = _pyarrow()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rec, tbl in tables_of(decoded).items():
        path = out / f"{rec}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, tbl.schema) as w:
            w.write_table(tbl)
        written.append(path)
    return written


def jsonl_lines(decoded: Decoded) -> Any:
    """One JSON object per record in file order, ``_record`` naming its type; bytes are
    hex strings."""
    for rec, row in decoded.rows:
        yield json.dumps({"_record": rec, **_jsonable(row)}, ensure_ascii=False)
