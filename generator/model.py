"""Shared helpers for emitters: Python names and type annotations of the object model."""

from __future__ import annotations

from . import ir


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def enum_class(name: str) -> str:
    return camel(name)


def flags_class(name: str) -> str:
    return camel(name)


def elem_annotation(t: ir.Type, family: ir.Family) -> str:
    if isinstance(t, ir.IntT) or isinstance(t, ir.VarintT):
        return "int"
    if isinstance(t, ir.FloatT):
        return "float"
    if isinstance(t, ir.BytesT):
        return "str" if t.text else "bytes"
    if isinstance(t, ir.RefT):
        if t.kind == "enum":
            return "int" if family.enums[t.target].open else enum_class(t.target)
        if t.kind == "flags":
            return flags_class(t.target)
        if t.kind == "alias":
            return "int"
        return camel(t.target)
    if isinstance(t, ir.SwitchT):
        opts = sorted({camel(r) for _, _, r in t.cases if r} |
                      ({camel(t.default)} if t.default not in ("error", "bytes") else set()))
        if t.default == "bytes":
            opts.append("bytes")
        if any(r is None for _, _, r in t.cases):
            opts.append("None")
        return " | ".join(opts) if opts else "None"
    return "object"


def annotation(f: ir.Field, family: ir.Family) -> str:
    base = elem_annotation(f.type, family)
    if f.bit_of is not None and f.path.endswith(f.name) and f.type == ir.IntT(8, False) \
            and _boolean(f, family):
        base = "bool"
    if f.convert is not None:  # the model holds the conversion's value
        from ..runtime import registry  # noqa: PLC0415

        base = registry.REGISTRY.numeric(f.convert).annotation
    if f.repeat is not None:
        base = {"numpy": "numpy.ndarray", "packed": "PackedArray"}.get(f.view, f"list[{base}]")
    if f.cond is not None or f.since is not None or f.until is not None:
        base += " | None"
    return base


def call_args(callee: ir.Record, args, caller: ir.Record, res) -> str:
    """Arguments for a sub-record call: given args, else the caller's same-named param,
    else the callee's default (one rule for the fast path and the converters)."""
    given = dict(args)
    out = []
    for p in callee.params.values():
        if p.name in given:
            out.append(given[p.name].render(res))
        elif p.name in caller.params:
            out.append(f"p_{p.name}")
        else:
            out.append(repr(p.default))
    return "".join(f", {a}" for a in out)


def _boolean(f: ir.Field, family: ir.Family) -> bool:
    """Whether bit-range model field ``f`` is a single ``bit:`` (a bool)."""
    for rec in family.records.values():
        hit = rec.bit_parts.get(f.name)
        if hit is not None and hit[1].field is f:
            return hit[1].boolean
    return False
