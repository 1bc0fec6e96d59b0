"""Absent values: a length or count prefix equal to a declared sentinel (``absent: -1``)
means no value (``None``); ``None`` encodes as the sentinel. The fast path reads the prefix,
then the field sized or counted by it; the Construct path wraps the field's construct in
``runtime.numbers.Absent``."""

from __future__ import annotations

import dataclasses
from typing import Any

from . import ir
from .expr import parse


def sentinel(f: ir.Field) -> int | None:
    if f.absent is not None:
        return f.absent
    return f.repeat.absent if f.repeat is not None else None


def prefix_of(f: ir.Field) -> ir.IntT | ir.VarintT:
    return f.repeat.prefix if f.repeat is not None else f.type.prefix


def _read_prefix(em: Any, t: ir.IntT | ir.VarintT, target: str, label: str) -> list[str]:
    if isinstance(t, ir.VarintT):
        return em.varint_decode(t, target, label)
    st = em.const("S", f"struct.Struct({('<' if t.endian == 'le' else '>') + t.code!r})")
    return [f"if pos + {t.size} > end:",
            f"    raise TruncatedError('{label.rsplit('.', 1)[1]} truncated', offset=pos, "
            f"path={label!r}, expected={t.size}, found=end - pos)",
            f"{target} = {st}.unpack_from(mv, pos)[0]",
            f"pos += {t.size}"]


def decode_lines(em: Any, rec: ir.Record, f: ir.Field, res: Any) -> list[str]:
    """Fast decoder: the prefix, then ``None`` or the field read with that size/count."""
    s = sentinel(f)
    if f.repeat is not None:
        local, label = "f__absc", f.name + ".count"
        g = dataclasses.replace(f, repeat=dataclasses.replace(
            f.repeat, prefix=None, absent=None, count=parse("_absc")))
        rest = em.decode_repeat(rec, g, res, False)
    else:
        local, label = "f__absn", f.name + ".length"
        g = dataclasses.replace(f, absent=None, type=dataclasses.replace(
            f.type, prefix=None, size=parse("_absn")))
        rest = em.decode_one(rec, g, g.type, f"f_{f.name}", f.name, res, False)
    return (_read_prefix(em, prefix_of(f), local, label)
            + [f"if {local} == {s!r}:", f"    f_{f.name} = None", "else:"]
            + ["    " + x for x in rest])


def sentinel_bytes(em: Any, t: ir.IntT | ir.VarintT, s: int) -> str:
    """Source of the sentinel's bytes in the prefix's encoding."""
    if isinstance(t, ir.VarintT):
        return em.varint_encode(t, repr(s))
    return repr(s.to_bytes(t.size, "little" if t.endian == "le" else "big", signed=t.signed))


def encode_lines(em: Any, rec: ir.Record, f: ir.Field, inner: list[str],
                 spans: Any) -> list[str]:
    """Fast encoder: ``None`` as the sentinel, else the field (whose own length or count
    must not be the sentinel: it would read back as ``None``)."""
    s = sentinel(f)
    name = f.name
    out = [f"if v.{name} is None:"]
    if name in spans.s:
        out.append(f"    _s_{name} = len(out)")
    out.append(f"    out += {sentinel_bytes(em, prefix_of(f), s)}")
    if name in spans.e:
        out.append(f"    _e_{name} = len(out)")
    out.append("else:")
    if s >= 0:
        t = f.type
        n = (f"len(v.{name}.encode({t.text!r}))" if isinstance(t, ir.BytesT) and t.text
             and f.repeat is None else f"len(v.{name})")
        out += [f"    if {n} == {s!r}:",
                f"        raise EncodeError('its length is the sentinel of an absent value "
                f"({s})', path={name!r})"]
    return out + ["    " + x for x in inner]


def construct(em: Any, f: ir.Field, base: str) -> str:
    """The Construct member: the field's own construct behind the sentinel check."""
    label = "count" if f.repeat is not None else "length"
    return f"Absent({sentinel(f)!r}, {em.int_c(prefix_of(f))}, {base}, {label!r})"


def check(res: Any, src: Any, path: str, fb: dict, f: ir.Field) -> None:
    """``absent:`` needs a length or count prefix the sentinel fits, and no ``if:``."""
    from .yamlsource import join  # noqa: PLC0415

    rp = fb.get("repeat")
    if isinstance(rp, dict) and "absent" in rp and "prefix" not in rp:
        res.err(src, join(path, "repeat.absent"),
                "absent: needs a length: (bytes/str) or repeat: {prefix: ...}")
        return
    s = sentinel(f)
    if s is None:
        return
    where = join(path, "absent") if f.absent is not None else join(path, "repeat.absent")
    t = prefix_of(f) if (f.repeat is not None and f.repeat.prefix is not None) or (
        isinstance(f.type, ir.BytesT) and f.type.prefix is not None and f.repeat is None) \
        else None
    if t is None:
        res.err(src, where, "absent: needs a length: (bytes/str) or repeat: {prefix: ...}")
        return
    if f.cond is not None or f.compressed is not None or f.framing is not None:
        res.err(src, where, "absent: cannot be combined with if:, compressed: or framing:")
        return
    if isinstance(t, ir.IntT) and not t.lo <= s <= t.hi:
        res.err(src, where, f"sentinel {s} does not fit {t.name}")
    if isinstance(t, ir.VarintT) and s < 0 and not t.signed:
        res.err(src, where, f"sentinel {s} is negative but {t.name} is unsigned")
