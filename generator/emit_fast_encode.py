"""Encoder checks the fast emitter adds so an encoder never writes bytes that decode to
another value: where the layout depends on an expression the encoder cannot derive from
the value (a size given by parameters, a condition on a size it measures, bytes left in
the enclosing region), the written bytes are checked against it and ``EncodeError``
names the field otherwise.

Also here: the encoder's checks of the rules a decoder enforces (ranges, asserts, the
length of fixed byte strings, a switch body's record), the fast path's run grouping for
the Construct path (so both report a truncation alike), and two text helpers moved out
of the fast emitter (``generator/fast``, whose passes call all of these).
"""

from __future__ import annotations

import re

from . import ir


def size_checked(rec: ir.Record, f: ir.Field, inner: list[str], res) -> list[str]:
    """``inner`` (the statements writing ``f``) followed by a check that the bytes written
    equal the field's ``size`` expression evaluated on the value and parameters."""
    if f.size is None or "_remaining" in f.size.names:
        return inner  # _remaining: the whole record is checked by decoding (needs_roundtrip)
    mark = f"_pz_{rec.name}_{f.name}"  # a record inlined into this one has its own
    size = f.size.render(res)
    text = f" differs from the size expression {f.size.source}, which is "
    return ([f"{mark} = len(out)"] + inner
            + [f"if len(out) - {mark} != {size}:",
               f"    raise EncodeError('encoded size ' + str(len(out) - {mark}) + {text!r} "
               f"+ str({size}), path={f.name!r})"])


def own_size_names(f: ir.Field, fields: list[ir.Field]) -> set[str]:
    """Size fields derived from ``f`` itself that ``f``'s condition reads: measured only once
    ``f`` is written, so presence is the value's and the condition is checked after."""
    if f.cond is None:
        return set()
    return {o.name for o in fields if o.derived_from == ("size", f.name)} & set(f.cond.names)


def own_size_cond(f: ir.Field, inner: list[str], cond: str, sizes: set[str]) -> list[str]:
    """Encode ``f`` when the value has it, then require its condition to hold on what was
    measured; without it the size field has no value that the encoder could write."""
    name = f.name
    return ([f"if v.{name} is not None:"] + ["    " + x for x in inner]
            + [f"    if not ({cond}):",
               f"        raise EncodeError('the condition is false for the encoded value', "
               f"path={name!r})",
               "else:",
               f"    raise EncodeError('absent, so its size field ({', '.join(sorted(sizes))}) "
               f"has no value to derive', path={name!r})"])


def reserved_bytes(f: ir.Field, t: ir.BytesT, res) -> list[str]:
    """Reserved bytes that are not part of a fixed run: zeros (none when to the end)."""
    if t.eos or t.size is None:
        return []
    return [f"out += bytes({t.size.render(res)})"]


def reserved_check(target: str, label: str) -> list[str]:
    """The decode check of reserved bytes read as one slice (before ``pos`` moves)."""
    return [f"if {target}.count(0) != len({target}):",
            f"    raise ConstraintError('reserved bytes must be zero', offset=pos, "
            f"path={label!r}, expected=bytes(len({target})), found={target})"]


def _expr_names(f: ir.Field) -> set[str]:
    names: set[str] = set()
    rp = f.repeat
    for e in (f.size, f.cond, getattr(f.type, "size", None), getattr(rp, "count", None),
              getattr(rp, "until_item", None)):
        names |= set(getattr(e, "names", ()))  # (a fixed size is a plain int)
    return names


_ROUNDTRIP: list = [None, None, None]  # (family, its records, answer) of the last call


def needs_roundtrip(family: ir.Family) -> set[str]:
    """Records whose encoded layout depends on ``_remaining`` (known only while decoding),
    themselves or through a record they contain: their encoders check the bytes by
    decoding them and comparing with the value. (Asked once per record while a family
    is emitted: the answer for the same family and records is kept.)"""
    fam, recs, got = _ROUNDTRIP
    now = tuple(map(id, family.records.values()))
    if fam is family and recs == now:
        return set(got)
    got = _needs_roundtrip(family)
    _ROUNDTRIP[:] = [family, now, got]
    return set(got)


def _needs_roundtrip(family: ir.Family) -> set[str]:
    direct = {name for name, rec in family.records.items()
              if any("_remaining" in _expr_names(f) for f in rec.fields)}
    out = set(direct)
    changed = True
    while changed:
        changed = False
        for name, rec in family.records.items():
            if name in out:
                continue
            if any(t in out for f in rec.fields for t in ir.referenced_records(f.type)):
                out.add(name)
                changed = True
    return out


def fast_runs(fast, rec: ir.Record) -> dict[str, tuple[int, tuple]] | None:
    """The fixed runs the fast decoder reads whole (first field -> (size, ((field path,
    offset, size), ...))), so the Construct path reports a truncation where the fast path
    does: at the first field the input cuts, before any rule of the fields ahead of it.
    None for a record with several layouts (versions); its runs differ per layout."""
    if len(rec.layouts) != 1:
        return None
    lay = rec.layouts[0]
    fast.lay, fast.cur_rec = lay, rec
    runs: dict[str, tuple[int, tuple]] = {}
    run: list = []

    def flush() -> None:
        if run:
            table, off = [], 0
            for it in run:
                table.append((it.field.name if it.role == "value" else
                              f"{it.field.name}.length", off, it.size))
                off += it.size
            runs[run[0].field.name] = (off, tuple(table))
            run.clear()

    for f in lay.fields:  # the grouping of FastEmitter.decoder
        if f.checksum is not None:
            flush()
        role = fast.run_role(f)
        if role is not None and not fast.compatible(run, f, role):
            flush()
        if role is not None:
            fast.add_run_item(run, f, role)
            if role != "value":
                flush()
            continue
        flush()
    flush()
    return runs


def trailing_checksum(lines: list[str]) -> list[str]:
    """A checksum computed right after its covered span ends covers the buffer from
    the span's start to its end: no end offset kept, no comparison with it."""
    text = "\n".join(lines)
    pat = re.compile(r"\n( +)(_e_\w+) = len\(out\)\n\1(.*)\(out if (_s_\w+) == 0 and \2 == "
                     r"len\(out\) else memoryview\(out\)\[\4:\2\]\)")
    for m in list(pat.finditer(text)):
        if len(re.findall(rf"\b{m.group(2)}\b", text)) == 3:  # this pair only
            text = text.replace(m.group(0), f"\n{m.group(1)}{m.group(3)}(out if {m.group(4)} "
                                f"== 0 else memoryview(out)[{m.group(4)}:])")
    return text.split("\n")


def struct_items(fmt: str) -> list[str]:
    """The struct code of each value ``unpack`` returns for ``fmt``."""
    out: list[str] = []
    for count, code in re.findall(r"(\d*)([xcbB?hHiIlLqQnNefdspP])", fmt.lstrip("<>!=@")):
        if code == "x":
            continue
        out += [code] if code in "sp" else [code] * int(count or 1)
    return out


def run_checks(fast, run: list) -> list[str]:
    """Checks of the values a fixed run packs that ``struct`` would not refuse: a byte
    string of another length (padded or cut silently) and a ``valid`` range the decoder
    enforces."""
    out: list[str] = []
    for it in run:
        f = it.field
        count = f.derived_from[1] if f.derived_from and f.derived_from[0] == "count" else None
        if it.role != "value" or not (f.in_model or count) or f.convert is not None:
            continue
        val = f"len(v.{count})" if count else f"v.{f.name}"
        if it.code.endswith("s") and fast.base_int(f.type) is None:
            out += [f"if len({val}) != {it.size}:",
                    f"    raise EncodeError('expected {it.size} bytes, found ' + "
                    f"str(len({val})), path={f.name!r})"]
        if f.valid is not None:
            out += valid_check(f, val)
    return out


def fixed_bytes_check(f: ir.Field) -> list[str]:
    """A conditional fixed-size byte string is packed alone, where ``struct`` would pad or
    cut another length silently: the encoder refuses it as the run check does."""
    t = f.type
    if not (f.in_model and isinstance(t, ir.BytesT) and not t.text and t.size is not None
            and f.repeat is None and f.compressed is None and f.convert is None):
        return []
    n = t.size.constant()
    if not isinstance(n, int):
        return []
    return [f"if len(v.{f.name}) != {n}:",
            f"    raise EncodeError('expected {n} bytes, found ' + str(len(v.{f.name})), "
            f"path={f.name!r})"]


def valid_check(f: ir.Field, val: str) -> list[str]:
    """The encoder's check of a ``valid`` range the decoder enforces."""
    lo, hi = f.valid
    bad = ([f"{val} < {lo}"] if lo is not None else []) + \
        ([f"{val} > {hi}"] if hi is not None else [])
    if not bad:
        return []
    return [f"if {' or '.join(bad)}:",
            f"    raise EncodeError('value ' + repr({val}) + ' out of range "
            f"{lo}..{hi}', path={f.name!r})"]


def case_check(val: str, cls: str, label: str, field: str) -> list[str]:
    """A switch body must be the record its tag selects (another one, written under this
    tag, decodes as something else)."""
    text = f"tag {label} takes a {cls}, not "
    return [f"if {val}.__class__ is not {cls}:",
            f"    raise EncodeError({text!r} + type({val}).__name__, path={field!r})"]


def value_rule(rec: ir.Record, f: ir.Field, names) -> bool:
    """A decode-time ``assert`` an encoder checks too: it reads only values the caller
    gives (model fields declared up to ``f``, parameters), so it holds before anything
    is written or it is an ``EncodeError``."""
    given = set(rec.params)
    for x in rec.fields:
        if x.in_model or x.value is not None or (x.derived_from and x.derived_from[0] == "count"):
            given.add(x.name)  # (computed from the value: a ``value:``, a list's count)
        if x is f:
            break
    return f.name in given and set(names) <= given


def late_rule(rec: ir.Record, f: ir.Field, names) -> bool:
    """A decode-time ``assert`` that reads a size the encoder measures: checked once the
    record is written (derived values are all known then)."""
    given = set(rec.params) | {x.name for x in rec.fields if x.in_model or x.derived_from}
    return not value_rule(rec, f, names) and f.name in given and set(names) <= given


def assert_checks(rec: ir.Record, lay: ir.Layout, res, late: bool = False) -> list[str]:
    """The encoder's checks of the record's value rules (see ``value_rule``), or with
    ``late`` of those that read measured sizes (``late_rule``)."""
    out: list[str] = []
    for f in lay.fields:
        for a in f.asserts:
            if not (late_rule if late else value_rule)(rec, f, a.check.names):
                continue
            # present when the value has it (a count: when it has the list it counts)
            held = f.derived_from[1] if f.derived_from else f.name
            guard = f"{res(held)} is not None and " if f.cond is not None else ""
            out += [f"if {guard}not ({a.check.render(res)}):",
                    f"    raise EncodeError({a.message!r}, path={f.name!r})"]
        if late and f.valid is not None and measured(f):
            # a size the encoder measured: outside the range, the decoder would refuse it
            val = res(f.name)
            lo, hi = f.valid
            bad = ([f"{val} < {lo}"] if lo is not None else []) + \
                ([f"{val} > {hi}"] if hi is not None else [])
            target = next((x for x in lay.fields if x.name == f.derived_from[1]), None)
            conds = f.cond is not None or (target is not None and target.cond is not None)
            guard = f"{res(f.derived_from[1])} is not None and " if conds else ""
            if bad:
                out += [f"if {guard}({' or '.join(bad)}):",
                        f"    raise EncodeError('value ' + repr({val}) + ' out of range "
                        f"{lo}..{hi}', path={f.name!r})"]
    return out


def measured(f: ir.Field) -> bool:
    """A size field whose value the encoder measures while writing its target."""
    return bool(f.derived_from) and f.derived_from[0] == "size"
