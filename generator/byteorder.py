"""Byte order as data: records, fields and files whose order an expression chooses.

A record's ``endian:`` (or a field's, or the file's over params) may be an expression
evaluating to 'le' or 'be'. Integers and floats written without a suffix (``u32``,
``f64``), length prefixes, counts, and enums/flags/aliases over such bases follow it;
explicitly suffixed ones (``u32le``) never do. The record then has one concrete layout
per order (``Layout.order``), as a versioned record has one per version, and a
dispatcher evaluates the expression -- from the fields it names, peeked at their fixed
offsets before anything else is read, or from params -- and calls the layout's
decoder/encoder. Records without an ``endian:`` of their own that are reached from a
data-ordered one inherit its order: they get a layout per order too, and the parent's
concrete layout calls the matching one (``_d_<record>_<order>``).
"""

from __future__ import annotations

import dataclasses

from . import ir
from .problems import Problems
from .sizes import base_of as base_of  # the emitters reach it as byteorder.base_of
from .sizes import field_size

ORDERS = ("le", "be")


def fixed_order(e: ir.Expr | None) -> str | None:
    """The order an ``endian:`` names literally ('le'/'be'), else None."""
    c = e.constant() if e is not None else None
    return c if c in ORDERS else None


def dynamic(rec: ir.Record) -> bool:
    """Whether the record chooses its byte order from data (its own expression)."""
    return rec.endian is not None and fixed_order(rec.endian) is None


def show(e: ir.Expr | None, default: str) -> str:
    """How docs, diffs and inspect name a byte order: ``le``, or ``le or be: EXPR``."""
    if e is None:
        return default
    return fixed_order(e) or f"le or be: {e.source}"


def record_text(rec: ir.Record, family: ir.Family) -> str | None:
    """A record's byte order for docs and inspect when it is not simply the file's."""
    if rec.endian is not None:
        return show(rec.endian, family.endian)
    if rec.orders:
        return f"le or be: inherited (alone: {family.endian})"
    return None


# -- concrete types ---------------------------------------------------------------
def with_order(t, order: str):
    """``t`` with its unsuffixed integer/float parts in ``order``."""
    if isinstance(t, (ir.IntT, ir.FloatT)):
        return dataclasses.replace(t, endian=order) if t.governed else t
    if isinstance(t, ir.BytesT) and isinstance(t.prefix, ir.IntT) and t.prefix.governed:
        return dataclasses.replace(t, prefix=with_order(t.prefix, order))
    if isinstance(t, (ir.RefT, ir.SwitchT)):  # a base's order, or a callee's
        return dataclasses.replace(t, order=order)
    return t


def concrete_field(f: ir.Field, order: str) -> ir.Field:
    """A copy of ``f`` whose governed parts read in ``order``."""
    rp = f.repeat
    if rp is not None and isinstance(rp.prefix, ir.IntT) and rp.prefix.governed:
        rp = dataclasses.replace(rp, prefix=with_order(rp.prefix, order))
    c = f.compressed
    if c is not None and c.length is not None and c.length.governed:
        c = dataclasses.replace(c, length=with_order(c.length, order))
    return dataclasses.replace(f, type=with_order(f.type, order), repeat=rp, compressed=c)


def governed(f: ir.Field, family: ir.Family) -> bool:
    """Whether a field's bytes depend on the byte order (a mark must not)."""
    t = f.type
    if isinstance(t, ir.RefT) and t.kind in ("enum", "flags", "alias"):
        t = base_of(family, t)
    if isinstance(t, (ir.IntT, ir.FloatT)):
        return t.governed and t.size > 1
    if isinstance(t, ir.BytesT):
        return isinstance(t.prefix, ir.IntT) and t.prefix.governed and t.prefix.size > 1
    return isinstance(t, (ir.RefT, ir.SwitchT))


def in_scope(rec: ir.Record, f: ir.Field) -> bool:
    """Whether the record's data-chosen order governs ``f`` (all its fields, or only the
    fields that carry the expression)."""
    return rec.endian_scope == "record" or (f.endian is not None and fixed_order(f.endian) is None)


# -- the plan: which records get which layouts --------------------------------------
def plan(family: ir.Family, problems: Problems) -> None:
    """Decide every record's orders (``Record.orders``), fix literal orders in place and
    report misuse; runs before the layout pass."""
    default = family.endian
    recs = family.records
    fe = family.endian_expr
    for rec in recs.values():
        # a field's literal order is fixed in place; field expressions choose the record's
        for i, f in enumerate(rec.fields):
            fo = fixed_order(f.endian)
            if fo is not None:
                rec.fields[i] = concrete_field(f, fo)
        exprs = {f.endian.source: f for f in rec.fields
                 if f.endian is not None and fixed_order(f.endian) is None}
        if exprs and rec.endian is not None:
            if dynamic(rec) and set(exprs) == {rec.endian.source}:
                continue
            f = next(iter(exprs.values()))
            problems.add(rec.file, f.line, f"{f.path}.endian", "a field's byte-order "
                         "expression must be its record's (the record already has endian:)")
            continue
        if len(exprs) > 1:
            f = list(exprs.values())[1]
            problems.add(rec.file, f.line, f"{f.path}.endian",
                         "the fields of one record choose their byte order by one expression")
            continue
        if exprs:
            rec.endian = next(iter(exprs.values())).endian
            rec.endian_scope = "fields"
        elif rec.endian is None and fe is not None and fe.names <= set(rec.params):
            rec.endian = fe  # the file's order, chosen by params this record takes
        fo = fixed_order(rec.endian)
        if fo is not None and fo != default:
            rec.fields[:] = [concrete_field(f, fo) for f in rec.fields]
    # inheritance: the orders each record is reached in
    need: dict[str, set[str]] = {n: set() for n in recs}
    changed = True
    while changed:
        changed = False
        for rec in recs.values():
            own = set(ORDERS) if dynamic(rec) else (
                {fixed_order(rec.endian)} if rec.endian is not None else need[rec.name] | {default})
            for f in rec.fields:
                orders = own if in_scope(rec, f) or fixed_order(rec.endian) else {default}
                for t in ir.referenced_records(f.type):
                    if t in recs and recs[t].endian is None and not orders <= need[t]:
                        need[t] |= orders
                        changed = True
    for rec in recs.values():
        if dynamic(rec):
            rec.orders = ORDERS
            check_marks(rec, family, problems)
        elif rec.endian is None and need[rec.name] - {default}:
            rec.orders = ORDERS
        for o in rec.orders:
            other = recs.get(f"{rec.name}_{o}")
            if other is not None:  # its generated names would be this order's
                problems.add(other.file, other.line, f"records.{other.name}",
                             f"record name {other.name} clashes with the {o} layout of "
                             f"{rec.name}, whose byte order is data")
        for f in rec.fields:
            t = f.type
            if f.chain is not None and isinstance(t, ir.RefT) and dynamic(recs[t.target]):
                # the previous item's value is read at a fixed place in one order
                src = next((x for x in recs[t.target].fields if x.name == f.chain.source), None)
                if src is not None and governed(src, family):
                    problems.add(rec.file, f.line, f"{f.path}.chain.from",
                                 f"{f.chain.source!r} follows the byte order each item "
                                 "chooses: give it an explicit suffix (u32le, u32be)")
            if f.view == "numpy" and isinstance(t, ir.RefT) and t.kind == "record" \
                    and recs[t.target].endian is None and need[t.target] - {default}:
                # one numpy dtype per record: it cannot follow an order chosen by data
                problems.add(rec.file, f.line, f"{f.path}.view", "view: numpy of a record "
                             "whose byte order is data (give its fields explicit suffixes)")
        if rec.orders and rec.rows:
            problems.add(rec.file, rec.line, f"records.{rec.name}.rows",
                         "rows: a record whose byte order is data has one layout per order "
                         "and no single loop to read rows with")


def _line(rec: ir.Record, key: str) -> int | None:
    src = getattr(rec, "_src", None)
    if src is None:
        return rec.line
    return src.line(f"records.{rec.name}.{key}") or rec.line


def mark_fields(rec: ir.Record, family: ir.Family) -> dict[str, tuple[int, ir.Field]]:
    """The fields at a fixed offset from the record's start: name -> (offset, field)."""
    out: dict[str, tuple[int, ir.Field]] = {}
    pos: int | None = 0
    memo: dict[str, int | None] = {}
    for f in rec.fields:
        if pos is None:
            break
        if f.cond is None and f.since is None and f.until is None:
            out.setdefault(f.name, (pos, f))
        size = field_size(f, family, memo) if f.since is None and f.until is None else None
        pos = pos + size if size is not None else None
    return out


def mark_code(f: ir.Field, family: ir.Family) -> tuple[str, int] | None:
    """(struct format, size) of a mark's stored value: an integer of either explicit
    order (or one byte), or fixed bytes."""
    t = f.type
    if isinstance(t, ir.RefT) and t.kind in ("enum", "alias"):
        t = base_of(family, t)
    if isinstance(t, ir.IntT) and t.code is not None:
        return ("<" if t.endian == "le" else ">") + t.code, t.size
    if isinstance(t, ir.BytesT) and t.prefix is None and not t.text and t.size is not None:
        n = t.size.constant()
        if isinstance(n, int) and not isinstance(n, bool):
            return f"{n}s", n
    return None


def check_marks(rec: ir.Record, family: ir.Family, problems: Problems) -> None:
    """The expression may name params and fields at a fixed offset whose own order is
    explicit or irrelevant; those are peeked before anything else is read."""
    marks = mark_fields(rec, family)
    where = (_line(rec, "endian"), f"records.{rec.name}.endian")
    if rec.endian_scope == "fields":
        f0 = next(f for f in rec.fields if f.endian is rec.endian)
        where = (f0.line, f"{f0.path}.endian")
    names = {f.name for f in rec.fields}
    for n in sorted(rec.endian.names):
        if n in rec.params:
            continue
        if n not in names:
            problems.add(rec.file, where[0], where[1],
                         f"the byte-order expression names {n!r}, neither a param nor a field")
        elif n not in marks:
            problems.add(rec.file, where[0], where[1],
                         f"the byte-order mark {n!r} must sit at a fixed offset")
        else:
            f = marks[n][1]
            if in_scope(rec, f) and governed(f, family):
                problems.add(rec.file, where[0], where[1],
                             f"the byte-order mark {n!r} is itself governed by the order: "
                             "give it an explicit suffix (u16le, u32be)")
            elif mark_code(f, family) is None:
                problems.add(rec.file, where[0], where[1],
                             f"the byte-order mark {n!r} must be an integer or fixed bytes")
            elif not f.in_model and not isinstance(f.const, (int, bytes)):
                problems.add(rec.file, where[0], where[1],
                             f"the byte-order mark {n!r} must be a stored value or a const")


def layout_fields(rec: ir.Record, fields: list[ir.Field], order: str) -> list[ir.Field]:
    """The fields of ``rec``'s layout for ``order``."""
    return [concrete_field(f, order) if in_scope(rec, f) else f for f in fields]


# -- the fast path's dispatchers ----------------------------------------------------
def callee_suffix(callee: ir.Record, order: str | None) -> str:
    """Suffix of the decoder/encoder a caller of ``order`` calls for ``callee``: an
    inheriting record's layout of that order; a record choosing its own order (or with a
    fixed one) through its dispatcher."""
    if callee.orders and callee.endian is None and order is not None:
        return f"_{order}"
    return ""


def twin_layout(family: ir.Family, name: str):
    """What ``_u_<name>`` would be: (record, layout) for a single-layout record or one
    order's layout (``<record>_<order>``), "dispatch" for a record with a layout per
    order (its twin evaluates the order), None when there is no twin."""
    rec = family.records.get(name)
    if rec is not None:
        if rec.version_from:
            return None
        if rec.orders:
            return "dispatch"
        return (rec, rec.layouts[0]) if len(rec.layouts) == 1 else None
    base, _, order = name.rpartition("_")
    rec = family.records.get(base)
    if order in ORDERS and rec is not None and rec.orders and not rec.version_from:
        return rec, next(lay for lay in rec.layouts if lay.order == order)
    return None


def fast_dispatcher(rec: ir.Record, kind: str, family: ir.Family) -> str:
    """``_d_<record>``/``_e_<record>``: evaluate the order and call its layout."""
    params = "".join(f", p_{p}" for p in rec.params)
    head = "mv, pos, end" if kind == "d" else "out, v"
    lines = [f"def _{kind}_{rec.name}({head}{params}):"]
    if rec.endian is None:  # inherited: used on its own, the file's order
        lines.append(f"    return _{kind}_{rec.name}_{family.endian}({head}{params})")
        return "\n".join(lines)
    marks = mark_fields(rec, family)
    names = {n for n in rec.endian.names if n not in rec.params}
    at = min((marks[n][0] for n in names), default=0)
    first = min(names, key=lambda n: marks[n][0]) if names else ""
    if kind == "d" and names:
        need = max(marks[n][0] + mark_code(marks[n][1], family)[1] for n in names)
        lines += [f"    if pos + {need} > end:",
                  f"        raise TruncatedError('byte order mark truncated', offset=pos, "
                  f"path={first!r}, expected={need}, found=end - pos)"]
        for n in sorted(names):
            off, f = marks[n]
            fmt, _ = mark_code(f, family)
            lines.append(f"    f_{n} = struct.unpack_from({fmt!r}, mv, pos + {off})[0]")

    def res(n: str) -> str:
        if n in rec.params:
            return f"p_{n}"
        if kind == "d":
            return f"f_{n}"
        f = marks[n][1]
        return f"v.{n}" if f.in_model else repr(f.const)

    lines.append(f"    _order = {rec.endian.render(res)}")
    for o in ORDERS:
        lines += [f"    if _order == {o!r}:",
                  f"        return _{kind}_{rec.name}_{o}({head}{params})"]
    if kind == "d":
        lines.append(f"    raise ConstraintError('byte order of {rec.name} must be le or be', "
                     f"offset=pos + {at}, path={first!r}, expected=\"'le' or 'be'\", "
                     "found=_order)")
    else:
        lines.append(f"    raise EncodeError('byte order of {rec.name} must be le or be, not ' "
                     f"+ repr(_order), path={first!r})")
    return "\n".join(lines)


def fast_twin(rec: ir.Record, family: ir.Family, many: bool = True) -> str:
    """``_u_<record>`` (the optimistic dispatcher: the marks read without bounds tests,
    the order's twin called) and, with ``many``, ``_m_<record>`` (records in one loop);
    whatever fails is re-read by the checked decoder, whose error is the one raised."""
    params = "".join(f", p_{p}" for p in rec.params)
    head = f"(mv, pos, end{params})"
    lines = [f"def _u_{rec.name}(mv, pos, end{params}):"]
    if rec.endian is None:
        lines.append(f"    return _u_{rec.name}_{family.endian}{head}")
    else:
        marks = mark_fields(rec, family)
        for n in sorted(rec.endian.names - set(rec.params)):
            off, f = marks[n]
            lines.append(f"    f_{n} = struct.unpack_from({mark_code(f, family)[0]!r}, mv, "
                         f"pos + {off})[0]")
        lines.append(f"    _order = {rec.endian.render(lambda n: f'p_{n}' if n in rec.params else f'f_{n}')}")
        for o in ORDERS:
            lines += [f"    if _order == {o!r}:", f"        return _u_{rec.name}_{o}{head}"]
        lines.append("    raise ValueError(_order)")
    if not many:
        return "\n".join(lines)
    ptuple = "(" + "".join(f"p_{p}, " for p in rec.params) + ")"
    fallback = f"_rest(_d_{rec.name}, {rec.name!r}, mv, _rs, _end, {ptuple}, _out)"
    lines += ["", f"def _m_{rec.name}(mv, pos, end{params}, _rest=_decode_many):",
              "    _out = []",
              "    _append = _out.append",
              "    _p0 = _rs = pos",
              "    _end = end",
              "    try:",
              "        while True:",  # see FastEmitter.optimistic: no `while cond:`
              "            if pos >= end:",
              "                break",
              "            _rs = pos",
              f"            _v, pos = _u_{rec.name}{head}",
              "            if pos <= _rs:",
              "                raise IndexError",
              "            _append(_v)",
              "    except Exception:",
              f"        return {fallback}",
              "    if pos > end and pos != _p0:  # the last record ran past the end",
              "        _out.pop()",
              f"        return {fallback}",
              "    return _out"]
    return "\n".join(lines)


def version_dispatchers(rec: ir.Record, dispatcher) -> list[str]:
    """A versioned record with a data-chosen order: one version dispatcher per order."""
    out = []
    for o in ORDERS:
        sub = dataclasses.replace(rec, name=f"{rec.name}_{o}",
                                  layouts=[lay for lay in rec.layouts if lay.order == o])
        for kind in ("d", "e"):
            text = dispatcher(sub, kind)
            # the layouts keep the record's own name: ``_d_<record>_v<N>_<order>``
            text = text.replace(f"_{kind}_{rec.name}_{o}_v", f"_{kind}_{rec.name}_v")
            out.append(text.replace(f"unsupported {rec.name}_{o} version",
                                    f"unsupported {rec.name} version"))
    return out
