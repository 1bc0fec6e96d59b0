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
    if f.absent is not None and isinstance(f.type, (ir.IntT, ir.VarintT)):
        return  # a size or count field: folded into the field it sizes (``fold``)
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


def fold(res: Any, src: Any, rec: ir.Record) -> None:
    """A size or count field with ``absent:`` right before the field it sizes or counts
    (``{name: n, type: i32, absent: -1}`` then ``{name: data, type: bytes, size: n}``) is
    that field's own length or count prefix: the two become one field with ``length:``
    (``repeat: {prefix:}``) and ``absent:``, which reads and writes the same bytes."""
    from .yamlsource import join  # noqa: PLC0415

    i = 0
    while i < len(rec.fields):
        f = rec.fields[i]
        if f.absent is None or not isinstance(f.type, (ir.IntT, ir.VarintT)):
            i += 1
            continue
        where = join(f.path, "absent")
        g = rec.fields[i + 1] if i + 1 < len(rec.fields) else None
        sized = g is not None and isinstance(g.type, ir.BytesT) and g.repeat is None \
            and g.type.size is not None and g.type.size.simple_name() == f.name
        counted = g is not None and g.repeat is not None and g.repeat.count is not None \
            and g.repeat.count.simple_name() == f.name and g.view != "numpy"
        if not (sized or counted):
            res.err(src, where, "absent: on an integer field needs the field it sizes or "
                                "counts right after it (size: NAME or repeat: {count: NAME})")
            return
        extra = [k for k, v in (("if", f.cond), ("const", f.const), ("valid", f.valid),
                                ("value", f.value), ("assert", f.asserts or None),
                                ("since", f.since), ("until", f.until)) if v is not None]
        readers = [x.name for x in rec.fields if x is not f and x is not g
                   and any(f.name in e.names for _, e in res.exprs_of(x))]
        if extra or readers:
            why = (f"takes no {', '.join(extra)}" if extra
                   else f"is read by {', '.join(readers)}")
            res.err(src, where, f"a size or count with absent: {why} (it is the prefix of "
                                f"{g.name})")
            return
        if sized:
            g.type = dataclasses.replace(g.type, size=None, prefix=f.type)
            g.absent = f.absent
        else:
            g.repeat = dataclasses.replace(g.repeat, count=None, prefix=f.type,
                                           absent=f.absent)
        del rec.fields[i]
        check(res, src, g.path, {}, g)
