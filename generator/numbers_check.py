"""Resolve and check the number constructs: named integer kinds with params (``types:
{NAME: {integer: KIND, ...}}``), bit fields (``bits:`` on an integer field) and absent
values (``absent:`` sentinels of lengths and counts)."""

from __future__ import annotations

from typing import Any

from ..runtime import registry
from . import ir
from .expr import Expr, parse
from .yamlsource import Source, join

_TYPE_KEYS = frozenset({"integer", "doc"})


def _param_value(key: str, value: Any) -> Any:
    """A param as the kind receives it: ``"hex:0020"`` is bytes; ``end`` (the bytes after
    ASCII digits) written as text is its latin-1 bytes."""
    if isinstance(value, str) and value.startswith("hex:"):
        return bytes.fromhex(value[4:])
    if key == "end" and isinstance(value, str):
        return value.encode("latin-1")
    return value


def integer_type(res: Any, src: Source, path: str, name: str, body: dict) -> ir.VarintT | None:
    """A named type giving a registered integer kind its params."""
    kind = body.get("integer")
    spec = registry.REGISTRY.integer_kinds.get(kind)
    if spec is None:
        res.err(src, join(path, "integer"),
                f"unknown integer kind {kind!r} (registered: "
                f"{', '.join(sorted(registry.REGISTRY.integer_kinds))})")
        return None
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in _TYPE_KEYS:
            continue
        if key not in spec.params:
            res.err(src, join(path, key),
                    f"integer kind {kind!r} has no param {key!r} (params: "
                    f"{', '.join(spec.params) or 'none'})")
            continue
        try:
            params[key] = _param_value(key, value)
        except ValueError as exc:
            res.err(src, join(path, key), f"bad {key}: {exc}")
            return None
    missing = [k for k in spec.required if k not in params]
    if missing:
        res.err(src, path, f"integer kind {kind!r} needs {', '.join(missing)}")
        return None
    if spec.check is not None:
        try:
            spec.check(**params)
        except (ValueError, TypeError) as exc:
            res.err(src, path, f"integer kind {kind!r}: {exc}")
            return None
    codec = registry.REGISTRY.integer_codec(kind, params)
    return ir.VarintT(kind=kind, params=tuple(sorted(params.items())), alias=name,
                      is_signed=spec.signed, max_bytes=codec.max_bytes, fixed=codec.fixed)


# -- bit fields -------------------------------------------------------------------------

def bit_fields(res: Any, src: Source, path: str, fb: dict, f: ir.Field) -> None:
    """``bits:`` on an integer field: named bit ranges become fields of the model; the
    integer itself is packed from them on encode (its ``value``) and checked on decode
    (unnamed bits zero, each range's enum, range and constant)."""
    bpath = join(path, "bits")
    t = f.type
    if not isinstance(t, ir.IntT):
        res.err(src, join(path, "type"), "bits: needs a fixed-width integer type (u8..u64)")
        return
    for key in ("value", "const", "repeat", "convert", "checksum", "valid", "reserved"):
        if key in fb:
            res.err(src, join(path, key), f"a field with bits: takes no {key!r} (its ranges "
                                          "have their own checks)")
            return
    order = fb.get("bit_order", "lsb0")
    if order not in ("lsb0", "msb0"):
        res.err(src, join(path, "bit_order"), "bit_order must be lsb0 or msb0")
        return
    body = fb["bits"]
    if not isinstance(body, dict) or not body:
        res.err(src, bpath, "bits: needs a mapping of names to {bit: N} or {bits: [first, last]}")
        return
    parts: list[ir.BitPart] = []
    used = 0
    for name, spec in body.items():
        ppath = join(bpath, name)
        res.check_name(src, ppath, name, "bit field")
        if isinstance(spec, int) and not isinstance(spec, bool):
            spec = {"bit": spec}
        if not isinstance(spec, dict) or ("bit" in spec) == ("bits" in spec):
            res.err(src, ppath, "a bit field needs exactly one of bit: N or bits: [first, last]")
            continue
        if "bit" in spec:
            first = last = spec["bit"]
        else:
            rng = spec["bits"]
            if not (isinstance(rng, list) and len(rng) == 2):
                res.err(src, join(ppath, "bits"), "bits: takes [first, last]")
                continue
            first, last = min(rng), max(rng)
        if not (isinstance(first, int) and isinstance(last, int) and 0 <= first
                and last < t.bits):
            res.err(src, ppath, f"bits outside 0..{t.bits - 1} of {t.name}")
            continue
        lo = first if order == "lsb0" else t.bits - 1 - last
        width = last - first + 1
        part = ir.BitPart(name, lo, width, enum=spec.get("enum"),
                          boolean="bit" in spec and "enum" not in spec and "valid" not in spec)
        if part.mask & used:
            res.err(src, ppath, "bit ranges overlap")
            continue
        used |= part.mask
        if part.enum is not None and part.enum not in res.enums:
            res.err(src, join(ppath, "enum"), f"unknown enum {part.enum!r}")
            continue
        if "valid" in spec:
            part.valid = (spec["valid"].get("min"), spec["valid"].get("max"))
        if "const" in spec:
            part.const = spec["const"]
            if not isinstance(part.const, int) or not 0 <= part.const < 1 << width:
                res.err(src, join(ppath, "const"), f"const does not fit in {width} bit(s)")
                continue
        if "value" in spec:
            if part.const is not None:
                res.err(src, join(ppath, "value"), "a bit field takes const or value, not both")
                continue
            part.value = res.expr(src, join(ppath, "value"), spec["value"])
        if part.const is None and part.value is None:
            ptype: ir.Type = ir.RefT("enum", part.enum) if part.enum else \
                ir.IntT(8 if width <= 8 else 64, False)
            part.field = ir.Field(name=name, type=ptype, doc=spec.get("doc", ""),
                                  cond=f.cond, since=f.since, until=f.until,
                                  line=src.line(ppath), path=ppath, bit_of=f.name)
        parts.append(part)
    f.bits = tuple(parts)
    f.value = pack_expr(f)
    f.asserts = f.asserts + decode_rules(res, f, t.bits)


def _part_expr(f: ir.Field, p: ir.BitPart) -> str:
    return f"({f.name} >> {p.lo} & {(1 << p.width) - 1})" if p.lo else \
        f"({f.name} & {(1 << p.width) - 1})"


def pack_expr(f: ir.Field) -> Expr:
    """The integer from its ranges (names of the model's bit fields; constants inline)."""
    terms = []
    for p in f.bits:
        v = str(p.const) if p.const is not None else p.name
        terms.append(f"({v} << {p.lo})" if p.lo else f"{v}")
    return parse(" | ".join(terms) if terms else "0")


def decode_rules(res: Any, f: ir.Field, bits: int) -> tuple[ir.Assert, ...]:
    """What a decoder checks of the integer: each range's constant, range and enum, and
    that bits no range names are zero (reported on the range's own name)."""
    out: list[ir.Assert] = []
    for p in f.bits:
        x = _part_expr(f, p)
        if p.const is not None:
            out.append(ir.Assert(parse(f"{x} == {p.const}"), "bad magic", path=p.name))
        if p.valid is not None:
            lo, hi = p.valid
            conds = ([f"{x} >= {lo}"] if lo is not None else []) + \
                ([f"{x} <= {hi}"] if hi is not None else [])
            if conds:
                out.append(ir.Assert(parse(" and ".join(conds)), "value out of range",
                                     path=p.name))
        if p.enum is not None and not res.enums[p.enum].open:
            values = sorted(m.value for m in res.enums[p.enum].members)
            out.append(ir.Assert(parse(" or ".join(f"{x} == {v}" for v in values) or "False"),
                                 f"unknown {p.enum} value", path=p.name))
    unnamed = ((1 << bits) - 1) & ~sum(p.mask for p in f.bits)
    if unnamed:
        out.append(ir.Assert(parse(f"{f.name} & {unnamed} == 0"), "undefined bits set",
                             path=f.name))
    return tuple(out)


# -- values with no bytes (``value:`` without a type) ------------------------------------

def virtual(res: Any, src: Source, path: str, fb: dict, rec: ir.Record) -> None:
    """A model value computed on decode from the record's fields; the fields' own
    ``value:`` expressions derive from it on encode."""
    res.check_name(src, join(path, "name"), fb.get("name"), "field")
    extra = sorted(set(fb) - {"name", "value", "doc", "spec"})
    if extra:
        res.err(src, path, f"a value with no type takes only name, value, doc, spec (not "
                           f"{', '.join(extra)})")
        return
    e = res.expr(src, join(path, "value"), fb["value"])
    if e is None:
        return
    rec.virtuals.append(ir.Field(name=fb["name"], type=ir.IntT(64, True), value=e,
                                 doc=fb.get("doc", ""), spec=fb.get("spec", ""),
                                 line=src.line(path), path=path))


def check_virtuals(res: Any, src: Source, rec: ir.Record, known: set[str],
                   by_name: dict) -> None:
    for v in rec.virtuals:
        if v.name in by_name or v.name in rec.bit_parts or v.name in rec.params \
                or sum(x.name == v.name for x in rec.virtuals) > 1:
            res.err(src, v.path, f"value {v.name!r} clashes with a field, bit field or param")
        for n in sorted(v.value.names - known):
            res.err(src, v.path, f"value refers to unknown name {n!r}")
