"""Drawn values for the number constructs: integer kinds' ranges, bit fields, values
with no bytes and absent values (hooks of :mod:`bytewright.properties.strategies`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from ..generator import absent, ir
from ..generator.model import camel
from ..runtime import registry as registry_mod

VIRTUAL_MAX = (1 << 32) - 1  # values with no bytes: drawn in this range


def kind_bounds(t: ir.VarintT) -> tuple[int, int]:
    """The values an integer kind can write."""
    if t.legacy:
        return (-(1 << 63), (1 << 63) - 1) if t.signed else (0, (1 << 64) - 1)
    return registry_mod.REGISTRY.integer_codec(t.kind, dict(t.params)).bounds


def draw_virtuals(builder: Any, draw: Callable, rec: ir.Record, env: dict, model: dict,
                  unknown: type[Exception]) -> None:
    """Draw the values with no bytes that fields derive from, within what those fields
    can hold (``year`` for a 7-bit ``value: "year - 1980"`` is 1980..2107)."""
    for v in rec.virtuals:
        lo, hi = virtual_bounds(builder, rec, v.name, unknown)
        if lo > hi:
            builder.reject(f"{rec.name}.{v.name}: no value fits every field derived from it")
        val = draw(st.one_of(st.integers(lo, min(hi, lo + 300)), st.integers(lo, hi)))
        env[v.name] = model[v.name] = val


def virtual_bounds(builder: Any, rec: ir.Record, name: str,
                   unknown: type[Exception]) -> tuple[int, int]:
    """The values of the virtual ``name`` for which every bit range and integer field
    whose ``value`` is a linear expression of ``name`` alone fits its width or type."""
    lo, hi = 0, VIRTUAL_MAX
    targets: list[tuple[ir.Expr, int, int]] = []
    for g in rec.fields:
        if g.value is not None and isinstance(g.type, ir.IntT):
            targets.append((g.value, g.type.lo, g.type.hi))
        targets += [(p.value, 0, (1 << p.width) - 1) for p in g.bits if p.value is not None]
    for expr, tlo, thi in targets:
        if expr.names != {name}:
            continue
        try:
            c0, c1, c2 = (int(builder.ev(expr, {name: x})) for x in (0, 1, 2))
        except (unknown, TypeError, ValueError):
            continue
        k = c1 - c0
        if k == 0 or c2 - c1 != k:
            continue  # not linear: the draw is checked when the field is derived
        if k < 0:  # tlo <= c0 + k*x <= thi  <=>  c0 - thi <= -k*x <= c0 - tlo
            c0, k, tlo, thi = -c0, -k, -thi, -tlo
        lo = max(lo, -((c0 - tlo) // k))  # ceil((tlo - c0) / k)
        hi = min(hi, (thi - c0) // k)
    return lo, hi


def model_value(module: Any, family: ir.Family, p: ir.BitPart, raw: int) -> Any:
    if p.boolean:
        return bool(raw)
    if p.enum is not None:
        cls = getattr(module, camel(p.enum))
        try:
            return cls(raw)
        except ValueError:
            return raw  # an open enum keeps a value it does not name
    return raw


def draw_bits(builder: Any, draw: Callable, rec: ir.Record, f: ir.Field, env: dict,
              model: dict, unknown: type[Exception]) -> None:
    """Draw the model's bit ranges of ``f``, derive the others, and pack the integer."""
    packed: int | None = 0
    for p in f.bits:
        top = (1 << p.width) - 1
        if p.const is not None:
            raw = p.const
        elif p.field is not None:
            lo, hi = 0, top
            if p.valid is not None:
                lo = max(lo, p.valid[0]) if p.valid[0] is not None else lo
                hi = min(hi, p.valid[1]) if p.valid[1] is not None else hi
            if p.enum is not None and not builder.family.enums[p.enum].open:
                values = [m.value for m in builder.family.enums[p.enum].members
                          if lo <= m.value <= hi]
                if not values:
                    builder.reject(f"{rec.name}.{p.name}: no {p.enum} member fits {p.width} bits")
                raw = draw(st.sampled_from(values))
            else:
                if lo > hi:
                    builder.reject(f"{rec.name}.{p.name}: empty range")
                raw = draw(st.integers(lo, hi))
            env[p.name] = model[p.name] = model_value(builder.module, builder.family, p, raw)
        else:
            try:
                raw = int(builder.ev(p.value, env))
            except unknown:
                packed = None
                continue
            if not 0 <= raw <= top:
                builder.reject(f"{rec.name}.{p.name}: derived value {raw} does not fit")
            env[p.name] = model_value(builder.module, builder.family, p, raw)
        if packed is not None:
            packed |= raw << p.lo
    if packed is not None:
        env[f.name] = packed


def draw_absent(draw: Callable, f: ir.Field) -> bool:
    """Whether an absent-able field is drawn as ``None``."""
    return absent.sentinel(f) is not None and draw(st.booleans())


def sentinel_length(f: ir.Field, val: Any) -> bool:
    """Whether ``val``'s length is the field's absent sentinel (it would read back as
    ``None``, and the encoders refuse it)."""
    s = absent.sentinel(f)
    if s is None or s < 0 or val is None:
        return False
    n = len(val.encode(f.type.text)) if isinstance(val, str) else len(val)
    return n == s


def longer(val: Any) -> Any:
    """``val`` with one more byte, character or item."""
    if isinstance(val, str):
        return val + "a"
    if isinstance(val, (bytes, bytearray)):
        return bytes(val) + b"\x00"
    return list(val) + list(val[-1:] or [0])
