"""Hypothesis strategies of valid values, derived from a family's resolved IR.

For every record (one concrete layout per version) :func:`case_strategy` draws a
:class:`Case`: an object-model value (the generated dataclasses), the params the codecs
need, and the *mutation sites* of that value: places where one change makes it invalid
(an integer out of its width, a fixed-size byte string one byte too long, a counted list
one item short...). Values are built field by field in record order, so conditions,
switch tags, counts and sizes see the fields before them exactly as a decoder would.

What the object model does not hold (derived counts and sizes, checksums, constants,
reserved bytes, padding, ``value:`` fields) is left to the encoders, which is the point of
the property: they must derive it consistently on both paths.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption

from ..generator import ir
from ..generator.expr import parse
from ..generator.model import camel
from ..runtime import registry as registry_mod
from . import numbers
from .framed import framed_value

MAX_ITEMS = 3  # items in a list whose length the schema leaves free: small values shrink well
MAX_BYTES = 12  # bytes in a byte string whose length the schema leaves free
MAX_SIZE = 1 << 14  # larger sizes asked by drawn values are thrown away (time, memory)
MAX_COUNT = 256
RETRIES = 12  # redraws of a sub-record whose own rules a draw broke, before giving up
SMALL = 16  # integers are drawn small half the time: they often size or count something
_FUNCS = {"min": min, "max": max, "len": len, "int": int, "bool": bool, "sum": sum,
          "next": next}  # lookup() renders as a next() over the items


_ZERO = object()  # a forced field value: the field's zero, whatever its type


class Unsupported(Exception):
    """The IR uses a construct this strategy builder cannot draw valid values for."""


class _Unknown(Exception):
    """An expression reads a value only the encoder knows (a derived size)."""


@dataclass
class Site:
    """One way to make a drawn value invalid: ``apply()`` changes it in place."""

    path: str  # field path of the change, e.g. ``header.count``
    kind: str  # range | length | count | terminator | text | valid | assert
    detail: str
    apply: Callable[[], None]


@dataclass
class Case:
    """A drawn value with the params its codecs take and where it can be broken."""

    record: str
    value: Any
    params: dict[str, Any]
    sites: list[Site] = field(default_factory=list)

    def __repr__(self) -> str:
        p = f", params={self.params!r}" if self.params else ""
        return f"{self.value!r}{p}"


class Scope:
    """What expressions see of a drawn record: every field (model or derived) by name."""

    def __init__(self, names: dict[str, Any], fields: frozenset[str]) -> None:
        self.__dict__["_names"] = names
        self.__dict__["_fields"] = fields

    def __getattr__(self, name: str) -> Any:
        try:
            return self._names[name]
        except KeyError:
            if name in self._fields:
                raise _Unknown(name) from None  # a value only the encoder derives
            raise _Absent(name) from None


class _Absent(Exception):
    """An expression reads a field the drawn record does not have (another switch case):
    decoding such bytes is an error, so the draw is thrown away."""


class _Env(dict):
    def __missing__(self, key: str) -> Any:
        raise _Unknown(key)


class Builder:
    """Draws values of one family's records through ``module``'s object model."""

    def __init__(self, family: ir.Family, module: ModuleType) -> None:
        self.family = family
        self.module = module
        self._codes: dict[str, Any] = {}
        self.rejects: dict[str, int] = {}
        self._last_sub: tuple[str, dict] | None = None
        self._tags: dict[str, list] = {}
        self._force: dict[str, Any] = {}  # field values the next record drawn must have
        self._preset: dict[str, Any] = {}  # values drawn ahead, by field path
        self._top: tuple[dict, frozenset[str]] | None = None  # the case's params, free ones
        self._plans: dict[tuple[str, str], Any] = {}
        self._budget = 0  # redraws of nested records left in this case

    def reject(self, why: str) -> None:
        """Throw this draw away, remembering why (a record where every draw is thrown
        away is reported unsupported with the commonest reason)."""
        self.rejects[why] = self.rejects.get(why, 0) + 1
        assume(False)

    # -- expressions ------------------------------------------------------------------
    def ev(self, expr: ir.Expr, env: dict[str, Any]) -> Any:
        code = self._codes.get(expr.source)
        if code is None:
            src = expr.render(lambda n: f"_e[{n!r}]")
            code = self._codes[expr.source] = compile(src, f"<{expr.source}>", "eval")
        try:
            # ``_e`` global: a lookup's generator expression reads it from its own scope
            return eval(code, {"__builtins__": {}, **_FUNCS, "_e": env})  # noqa: S307
        except (_Unknown, KeyError) as exc:
            raise _Unknown(str(exc)) from None
        except AttributeError as exc:
            raise _Unknown(str(exc)) from None
        except _Absent as exc:
            self.reject(f"{expr.source!r} reads {exc}, absent from the drawn case")
        except (ValueError, TypeError) as exc:  # e.g. int(x, 8) over bytes not digits
            self.reject(f"{expr.source!r}: {exc}")

    # -- entry points -----------------------------------------------------------------
    def case_strategy(self, name: str) -> st.SearchStrategy[Case]:
        rec = self.family.records[name]
        self._static_check(rec, set())

        @st.composite
        def draw_case(draw: Callable) -> Case:
            params = self.draw_params(draw, rec)
            self._preset = {}
            self._budget = 4 * RETRIES
            self._top = (params, self._free_params(rec))
            sites: list[Site] = []
            value, _ = self.draw_record(draw, rec, params, name, sites)
            return Case(name, value, params, sites)

        return draw_case()

    def _static_check(self, rec: ir.Record, seen: set[str]) -> None:
        """Refuse, up front and with a reason, the constructs drawn values cannot honour."""
        if rec.name in seen:
            return
        seen.add(rec.name)
        for f in rec.fields:
            for e in (f.cond, f.size, f.repeat.count if f.repeat else None):
                if e is not None and "_offset" in e.names:
                    raise Unsupported(f"{rec.name}.{f.name}: an expression reads _offset")
            for sub in ir.referenced_records(f.type):
                self._static_check(self.family.records[sub], seen)

    # -- params -----------------------------------------------------------------------
    def _tag_keys(self, rec: ir.Record) -> dict[str, list]:
        """Names a switch or a codec map reads, and the values that keep them valid."""
        keys: dict[str, list] = {}
        for f in rec.fields:
            t = f.type
            if isinstance(t, ir.SwitchT) and t.default == "error":
                n = t.on.simple_name()
                if n is not None:
                    allowed = [k for k, _, _ in t.cases]
                    keys[n] = [k for k in keys[n] if k in allowed] if n in keys else allowed
            if f.compressed is not None and f.compressed.codecs:
                n = f.compressed.algorithm.simple_name()
                if n is not None:
                    keys.setdefault(n, [("codec", label) for label, _ in f.compressed.codecs])
        marks = sorted(rec.endian.names - set(rec.params)) if rec.endian is not None else []
        if len(marks) == 1 and marks[0] not in keys:
            # byte order as data: the mark takes values that choose an order (the
            # expression's constants and their neighbours, kept when they give le/be)
            n = marks[0]
            ok = []
            for c in sorted({c + d for c in _constants(rec.endian) for d in (0, 1)} | {0, 1}):
                try:
                    if self.ev(rec.endian, _Env({n: c})) in ("le", "be"):
                        ok.append(c)
                except _Unknown:
                    continue
            if ok:
                keys[n] = ok
        return keys

    def draw_params(self, draw: Callable, rec: ir.Record) -> dict[str, Any]:
        tags = self._tag_keys(rec)
        out: dict[str, Any] = {}
        for p in rec.params.values():
            if p.name == rec.version_from and rec.version_range:
                lo, hi = rec.version_range
                out[p.name] = draw(st.integers(lo, hi))
            elif p.name in tags:
                out[p.name] = draw(st.sampled_from(self._resolve_keys(tags[p.name], p.type)))
            elif p.type == "bool":
                out[p.name] = draw(st.booleans())
            elif p.type == "int":
                if p.default is not None:
                    out[p.name] = p.default
                else:
                    out[p.name] = draw(st.sampled_from(self._param_candidates(rec, p.name)))
            elif p.type in self.family.enums:
                e = self.family.enums[p.type]
                members = [getattr(self._enum_cls(e.name), m.name) for m in e.members
                           if m.value not in e.retired]
                out[p.name] = draw(st.sampled_from(members))
            elif p.default is not None:
                out[p.name] = p.default
            elif p.type == "bytes":
                n = self._bytes_param_size(rec, p.name)
                out[p.name] = draw(st.binary(min_size=0 if n is None else n,
                                             max_size=SMALL if n is None else n))
            else:
                raise Unsupported(f"{rec.name}: param {p.name!r} of type {p.type!r} "
                                  "has no default")
        return out

    def _bytes_param_size(self, rec: ir.Record, name: str) -> int | None:
        """The size a ``bytes`` param must have: that of a fixed-size field whose value
        is the param (``value: sync`` or an assert ``FIELD == sync``), else None."""
        for f in rec.fields:
            if not isinstance(f.type, ir.BytesT):
                continue
            sides = [f.value] if f.value is not None else []
            sides += [e for a in f.asserts if (e := _eq_side(a.check, f.name)) is not None]
            if not any(e.simple_name() == name for e in sides):
                continue
            for size in (f.size, f.type.size):
                n = size.constant() if size is not None else None
                if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                    return n
        return None

    def _param_candidates(self, rec: ir.Record, name: str) -> list[int]:
        """Small values, and values near the constants of every expression reading the
        param (``semantic_dims - 16`` asks for at least 16)."""
        out = list(range(0, 5))
        for e in self._expressions(rec, set()):
            if name in e.names:
                for c in _constants(e):
                    out += [c, c + 1, c + 2]
        out += [8, 16]
        vals = sorted({v for v in out if v >= 0})
        rules = self._caller_rules(rec.name, name)
        kept = []
        for v in vals:
            ok = True
            for field_name, check in rules:
                try:
                    ok = ok and bool(self.ev(check, _Env({field_name: v})))
                except _Unknown:
                    pass  # the rule reads more than the forwarded field
            if ok:
                kept.append(v)
        return kept or vals

    def _caller_rules(self, target: str, param: str) -> list[tuple[str, ir.Expr]]:
        """The asserts of fields that callers forward as ``param`` of ``target``: a
        param's valid values are declared where its value is read."""
        out = []
        for r in self.family.records.values():
            for f in r.fields:
                if target not in ir.referenced_records(f.type):
                    continue
                args = f.type.args if isinstance(f.type, (ir.RefT, ir.SwitchT)) else ()
                for name, e in args:
                    src = e.simple_name()
                    if name != param or src is None:
                        continue
                    for g in r.fields:
                        if g.name == src:
                            out += [(src, a.check) for a in g.asserts]
        return out

    def _expressions(self, rec: ir.Record, seen: set[str]) -> Iterator[ir.Expr]:
        if rec.name in seen:
            return
        seen.add(rec.name)
        for f in rec.fields:
            t = f.type
            yield from (e for e in (f.cond, f.size, f.value) if e is not None)
            if f.repeat is not None and f.repeat.count is not None:
                yield f.repeat.count
            yield from (a.check for a in f.asserts)
            if isinstance(t, ir.BytesT) and t.size is not None:
                yield t.size
            if isinstance(t, ir.SwitchT):
                yield t.on
            for sub in ir.referenced_records(f.type):
                yield from self._expressions(self.family.records[sub], seen)

    def _resolve_keys(self, keys: list, type_name: str | None) -> list:
        out = []
        for k in keys:
            if isinstance(k, tuple) and k[0] == "codec":
                e = self.family.enums.get(type_name or "")
                if e is not None and e.value_of(k[1]) is not None:
                    out.append(getattr(self._enum_cls(e.name), k[1]))
                else:
                    out.append(k[1])
            else:
                out.append(k)
        return out

    # -- records ----------------------------------------------------------------------
    def _enum_cls(self, name: str) -> type:
        return getattr(self.module, camel(name))

    def draw_record(self, draw: Callable, rec: ir.Record, params: dict[str, Any], path: str,
                    sites: list[Site]) -> tuple[Any, Scope]:
        env = _Env(params)
        force, self._force = self._force, {}  # only for this record's own fields
        solved, measured = self._solvable(rec, params)
        for p in solved | measured:
            del env[p]  # computed from the fields below, never read before
        layout = rec.layouts[0]
        version = None
        if rec.version_range is not None:
            if rec.version_from in params:
                version = params[rec.version_from]
            else:
                version = draw(st.integers(*rec.version_range))
            layout = next(lay for lay in rec.layouts if version in lay.versions)
        tags = self._tag_keys(rec)
        self._tags = tags
        model: dict[str, Any] = {}
        deferred: list[tuple[ir.Field, ir.Assert]] = []
        sized: dict[str, ir.Field] = {}
        for f in layout.fields:
            if f.derived_from is not None and f.derived_from[0] == "size":
                sized[f.derived_from[1]] = f
        local_sites: list[tuple[ir.Field, Site]] = []
        # values with no type that no field derives from are the decoder's results:
        # computed once the fields are drawn, not drawn
        driving = {n for g in rec.fields if g.value is not None for n in g.value.names} \
            | {n for g in rec.fields for bp in g.bits if bp.value is not None
               for n in bp.value.names}
        results = [v for v in rec.virtuals if v.name not in driving]
        numbers.draw_virtuals(self, draw, dataclasses.replace(
            rec, virtuals=[v for v in rec.virtuals if v.name in driving]), env, model,
            _Unknown)
        peeked = {f.name for f in layout.fields if f.peek}
        for f in layout.fields:
            fpath = f"{path}.{f.name}"
            if f.peek:
                continue  # read, never written: the fields testing it are drawn present or not
            if f.cond is not None:
                if "_remaining" in f.cond.names or f.cond.names & peeked:
                    present = draw(st.booleans())
                else:
                    present = bool(self._ev_or_unsupported(f.cond, env, rec, f))
                if not present:
                    env[f.name] = None
                    if f.in_model:
                        model[f.name] = f.default if f.has_default else None
                    continue
            if f.bits:
                numbers.draw_bits(self, draw, rec, f, env, model, _Unknown)
                continue
            if not f.in_model:
                self._derived(draw, rec, f, env, tags, deferred)
                continue
            if numbers.draw_absent(draw, f):
                env[f.name] = model[f.name] = None
                continue
            if f.filled:  # where a located structure is: the encoder fills it
                model[f.name] = env[f.name] = 0
                continue
            if f.compressed is not None:
                self._check_codec(rec, f, env)
            if f.name in force and force[f.name] is _ZERO:
                val = self._zero(rec, f, env)
                env[f.name] = val
            elif f.name in force:
                val = self._coerce(f, force[f.name])
                env[f.name] = val
            elif fpath in self._preset:
                val = self._preset[fpath]
                env[f.name] = val
            elif self._size_plan(rec, f) is not None:
                val = self._draw_measured(draw, rec, f, env, fpath, sites)
                env[f.name] = val
                if isinstance(f.type, ir.IntT):
                    self._int_sites(f, fpath, f.type.lo, f.type.hi, local_sites)
            elif f.name == rec.version_from and version is not None:
                val = version
            else:
                self._last_sub = None
                val, sval = self._draw_field(draw, rec, f, env, tags, fpath, sites, local_sites)
                p = f.size.simple_name() if f.size is not None else None
                if p is not None and p in measured:
                    # the size is a free param: take it from the value, not the other way
                    n = None if self._last_sub is None else self._encoded_len(
                        self._last_sub[0], val, self._last_sub[1])
                    if n is None:
                        self.reject(f"{rec.name}.{f.name}: value does not encode")
                    env[p] = params[p] = n
                else:
                    self._check_size(rec, f, env, val)
                env[f.name] = sval
            if f.name == rec.version_from and version is not None:
                env[f.name] = val
            model[f.name] = val
            if numbers.sentinel_length(f, val):  # would read back as None: one item more
                env[f.name] = model[f.name] = numbers.longer(val)
            if f.name in sized:
                s = sized[f.name]
                n = self._measured(f, val)
                if n is not None:
                    env[s.name] = n + s.derived_offset
            for a in f.asserts:
                deferred.append((f, a))
        for f in layout.fields:
            if f.value is not None and f.name not in env:
                try:
                    env[f.name] = self.ev(f.value, env)
                except _Unknown:
                    pass
        for v in results:
            try:
                env[v.name] = model[v.name] = self.ev(v.value, env)
            except _Unknown as exc:
                raise Unsupported(f"{rec.name}.{v.name}: value {v.value.source!r} reads "
                                  f"{exc}, which only the encoder derives") from None
        for p in sorted(solved):
            self._solve_param(rec, p, deferred, env, params)
        for f, a in deferred:
            try:
                ok = self.ev(a.check, env)
            except _Unknown:
                continue  # reads a value only the encoder derives: the decode will tell
            if not ok:
                self.reject(f"{rec.name}.{f.name}: assert {a.check.source!r} not met")
        if rec.endian is not None and rec.endian.constant() is None:
            try:
                order = self.ev(rec.endian, env)
            except _Unknown:
                order = "le"  # reads a value only the encoder derives: the decode will tell
            if order not in ("le", "be"):
                self.reject(f"{rec.name}: byte order {order!r} is neither le nor be")
        for loc in rec.located:
            model[loc.name] = self._draw_located(draw, rec, loc, model, path, sites, env)
        for f in rec.model_fields:  # absent from this version: the default, else None
            model.setdefault(f.name, f.default if f.has_default else None)
        cls = getattr(self.module, camel(rec.name))
        value = cls(**model)
        for _f, site in local_sites:
            sites.append(site)
        return value, Scope(dict(env), frozenset(f.name for f in rec.fields))

    def _draw_located(self, draw: Callable, rec: ir.Record, loc: ir.Located,
                      model: dict, path: str, sites: list[Site], env: dict) -> Any:
        """A located field's value: its record (a list of them for a run or ``each``),
        placed by the encoder, which fills the offsets, counts and sizes naming it."""
        fills = {kind for kind, _ in loc.fills}
        raw = loc.target == "bytes"
        if (loc.how == "at" and "offset" not in fills) or \
                (loc.count is not None and "count" not in fills) or \
                (loc.size is not None and "size" not in fills and not raw):
            self.reject(f"{rec.name}.{loc.name}: a location, count or size the encoder "
                        "checks but cannot fill")
        fpath = f"{path}.{loc.name}"
        if loc.cond is not None:  # presence is the value's (a chain ends within a few)
            self._located_depth = getattr(self, "_located_depth", 0)
            if self._located_depth >= 2 or not draw(st.booleans()):
                return None
            self._located_depth += 1
            try:
                return self._draw_located(draw, rec, dataclasses.replace(loc, cond=None),
                                          model, path, sites, env)
            finally:
                self._located_depth -= 1
        if raw:  # raw bytes placed as they are, as many as a size it cannot fill says
            if "size" in fills:
                return draw(st.binary(max_size=MAX_BYTES))
            try:
                n = self.ev(loc.size, env)
            except _Unknown as exc:
                raise Unsupported(f"{rec.name}.{loc.name}: size {loc.size.source!r} reads "
                                  f"{exc}, which only the encoder derives") from None
            if not isinstance(n, int) or not 0 <= n <= MAX_SIZE:
                self.reject(f"{rec.name}.{loc.name}: size {loc.size.source!r} is {n!r}")
            return draw(st.binary(min_size=n, max_size=n))
        sub = self.family.records[loc.target]
        if loc.how == "each":
            n = len(model.get(loc.each) or ())
        elif loc.many:
            n = draw(st.integers(0, MAX_ITEMS))
        else:
            return self._draw_sub(draw, sub, {}, fpath, sites)[0]
        return [self._draw_sub(draw, sub, {}, f"{fpath}[{i}]", sites)[0] for i in range(n)]

    def _draw_sub(self, draw: Callable, sub: ir.Record, params: dict[str, Any], path: str,
                  sites: list[Site]) -> tuple[Any, Scope]:
        """A nested record, redrawn (within a budget per case) when a draw breaks one of
        its own rules: a list of items each with a rule would otherwise almost never be
        drawn whole."""
        n0, force, preset = len(sites), self._force, dict(self._preset)
        while True:
            try:
                return self.draw_record(draw, sub, params, path, sites)
            except UnsatisfiedAssumption:
                if self._budget <= 0:
                    raise
                self._budget -= 1
                del sites[n0:]
                self._force, self._preset = force, dict(preset)

    def _meets(self, asserts: tuple[ir.Assert, ...], env: dict) -> bool:
        """Every assert that can be evaluated holds (one reading a value only the encoder
        or a later solve knows is left to the final check)."""
        for a in asserts:
            try:
                if not self.ev(a.check, env):
                    return False
            except _Unknown:
                continue
        return True

    # -- solving instead of filtering -------------------------------------------------
    def _free_params(self, rec: ir.Record) -> frozenset[str]:
        """The case's integer params that are drawn from candidates, not fixed by a
        default, a version range or a switch: these may be computed instead."""
        tags = self._tag_keys(rec)
        return frozenset(p.name for p in rec.params.values()
                         if p.type == "int" and p.default is None and p.name not in tags
                         and not (p.name == rec.version_from and rec.version_range))

    def _solvable(self, rec: ir.Record, params: dict) -> tuple[set[str], set[str]]:
        """Free params of the case's record computed after its fields: ``solved`` ones
        are read only by ``p == EXPR`` asserts (set to EXPR), ``measured`` ones only as
        the exact size of one record field (set to its encoded length)."""
        solved: set[str] = set()
        measured: set[str] = set()
        if self._top is None or params is not self._top[0]:
            return solved, measured
        for p in self._top[1]:
            reads = _reads(rec, p)
            if not reads:
                continue
            if all(kind == "assert" and _eq_side(e, p) is not None for kind, _f, e in reads):
                solved.add(p)
            elif len(reads) == 1 and reads[0][0] == "size" and reads[0][1].repeat is None \
                    and reads[0][2].simple_name() == p and reads[0][1].cond is None \
                    and isinstance(reads[0][1].type, (ir.RefT, ir.SwitchT)) \
                    and reads[0][1].in_model:
                measured.add(p)
        return solved, measured

    def _solve_param(self, rec: ir.Record, p: str, deferred: list, env: dict,
                     params: dict) -> None:
        for _f, a in deferred:
            side = _eq_side(a.check, p)
            if side is None:
                continue
            try:
                v = self.ev(side, env)
            except _Unknown:
                continue
            if not self._meets(tuple(ir.Assert(check, "") for _n, check in
                                     self._caller_rules(rec.name, p)), _Env({p: v})):
                self.reject(f"{rec.name}: param {p} = {v!r} breaks its callers' rules")
            env[p] = params[p] = v
            return
        env[p] = params[p]  # no rule read it in this draw (absent field): keep the drawn one

    def _size_plan(self, rec: ir.Record, f: ir.Field) -> tuple | None:
        """``(g, sub, b)`` when the integer field ``f`` is forwarded to the later record
        field ``g`` as the param that is the exact size of ``sub``'s record field ``b``:
        ``f`` is then the encoded length of a ``b`` drawn first, so they always agree."""
        key = (rec.name, f.name)
        if key in self._plans:
            return self._plans[key]
        plan = None
        if f.in_model and f.repeat is None and f.convert is None and f.chain is None \
                and isinstance(f.type, (ir.IntT, ir.VarintT)):
            later = rec.fields[rec.fields.index(f) + 1:] if f in rec.fields else []
            for g in later:
                t = g.type
                if not (isinstance(t, ir.RefT) and t.kind == "record") or g.repeat \
                        or g.cond is not None:
                    continue
                sub = self.family.records[t.target]
                if sub.version_range is not None:
                    continue
                for pname, e in t.args:
                    if e.simple_name() != f.name or sub.params.get(pname) is None:
                        continue
                    reads = _reads(sub, pname)
                    if len(reads) != 1 or reads[0][0] != "size":
                        continue
                    b = reads[0][1]
                    bt = b.type
                    if isinstance(bt, ir.RefT) and bt.kind == "record" and not bt.args \
                            and b.repeat is None and b.cond is None and b.in_model:
                        plan = (g, sub, b)
                        break
                if plan is not None:
                    break
        self._plans[key] = plan
        return plan

    def _draw_measured(self, draw: Callable, rec: ir.Record, f: ir.Field, env: dict,
                       fpath: str, sites: list[Site]) -> int:
        """Draw the record ``f`` measures (see :meth:`_size_plan`) and return its length;
        the drawn record is kept for its place in the later field."""
        g, sub, b = self._size_plan(rec, f)
        bsub = self.family.records[b.type.target]
        bpath = f"{fpath.rsplit('.', 1)[0]}.{g.name}.{b.name}"
        t = f.type
        lo, hi = (t.lo, t.hi) if isinstance(t, ir.IntT) else (0, (1 << 64) - 1)
        if f.valid is not None:
            lo = lo if f.valid[0] is None else max(lo, f.valid[0])
            hi = hi if f.valid[1] is None else min(hi, f.valid[1])
        for _ in range(RETRIES):
            n0 = len(sites)
            try:
                bparams = self._sub_params(draw, bsub, (), sub, _Env())
                val, _ = self.draw_record(draw, bsub, bparams, bpath, sites)
            except UnsatisfiedAssumption:
                del sites[n0:]
                continue
            n = self._encoded_len(bsub.name, val, bparams)
            trial = _Env(env)
            trial[f.name] = n
            if n is not None and lo <= n <= hi and self._meets(f.asserts, trial):
                self._preset[bpath] = val
                return n
            del sites[n0:]
        self.reject(f"{rec.name}.{f.name}: no {b.name} drawn encodes to a length its "
                    "asserts accept")
        return 0

    def _encoded_len(self, target: str, val: Any, params: dict) -> int | None:
        import inspect  # noqa: PLC0415

        enc = getattr(self.module, f"encode_{target}")
        try:
            names = set(inspect.signature(enc).parameters)
            return len(enc(val, **{k: v for k, v in params.items() if k in names}))
        except Exception:  # noqa: BLE001 - the property itself reports encoder failures
            return None

    def _forward_constants(self, rec: ir.Record, f: ir.Field, lo: int, hi: int) -> list[int]:
        """The constants of later fields' asserts that read ``f`` (``lower == 0`` in the
        rule of ``upper``): ``f`` drawn from them half the time can meet those rules."""
        out: set[int] = set()
        for g in rec.fields:
            if g is f:
                continue
            for a in g.asserts:
                if f.name in a.check.names:
                    out.update(c for c in _constants(a.check) if lo <= c <= hi)
        return sorted(out)

    def _zero(self, rec: ir.Record, f: ir.Field, env: dict) -> Any:
        """``f``'s zero: zero bytes of its size, an empty text or list, or 0."""
        t = f.type
        if f.repeat is not None:
            return []
        if isinstance(t, ir.BytesT):
            n = 0
            size = f.size if f.size is not None else t.size
            if size is not None and t.terminator is None:
                n = self._ev_or_unsupported(size, env, rec, f)
            if not isinstance(n, int) or not 0 <= n <= MAX_SIZE:
                self.reject(f"{rec.name}.{f.name}: size {n!r} has no zero value")
            return "\x00" * n if t.text else bytes(n)
        return self._coerce(f, 0)

    def _coerce(self, f: ir.Field, raw: Any) -> Any:
        """``raw`` as the model holds it for ``f`` (an enum member for a closed enum)."""
        t = f.type
        if isinstance(t, ir.RefT) and t.kind == "enum" and not self.family.enums[t.target].open:
            e = self.family.enums[t.target]
            for m in e.members:
                if m.value == raw or m.name == raw:
                    return getattr(self._enum_cls(e.name), m.name)
        return raw

    def _check_codec(self, rec: ir.Record, f: ir.Field, env: dict) -> None:
        """Throw away values whose compression algorithm has no codec (an encode error)."""
        c = f.compressed
        assert c is not None
        if c.when is not None and not self._ev_or_unsupported(c.when, env, rec, f):
            return
        if not c.codecs:
            return
        alg = self._ev_or_unsupported(c.algorithm, env, rec, f)
        label = alg.name if isinstance(alg, enum.Enum) else alg
        if isinstance(label, bytes):  # as the runtime maps it (codec.algorithm_name)
            label = label.decode("latin-1")
        if label not in dict(c.codecs):
            self.reject(f"{rec.name}.{f.name}: algorithm {label!r} has no codec")

    def _check_size(self, rec: ir.Record, f: ir.Field, env: dict, val: Any) -> None:
        """A record field with an exact ``size:``: keep only values that encode to it."""
        if f.size is None or isinstance(f.type, ir.BytesT) or f.repeat is not None \
                or "_remaining" in f.size.names or self._last_sub is None:
            return
        try:
            want = self.ev(f.size, env)
        except _Unknown:
            return  # derived: the encoder writes the size
        target, params = self._last_sub
        enc = getattr(self.module, f"encode_{target}")
        try:
            import inspect  # noqa: PLC0415

            names = set(inspect.signature(enc).parameters)
            got = len(enc(val, **{k: v for k, v in params.items() if k in names}))
        except Exception:  # noqa: BLE001 - the property itself reports encoder failures
            return
        if got != want:
            self.reject(f"{rec.name}.{f.name}: drawn value encodes to {got} bytes, the "
                        f"size {f.size.source!r} asks {want}")

    def _ev_or_unsupported(self, expr: ir.Expr, env: dict, rec: ir.Record,
                           f: ir.Field) -> Any:
        try:
            return self.ev(expr, env)
        except _Unknown as exc:
            raise Unsupported(f"{rec.name}.{f.name}: expression {expr.source!r} reads "
                              f"{exc}, which only the encoder derives") from None

    def _measured(self, f: ir.Field, val: Any) -> int | None:
        if isinstance(f.type, ir.BytesT) and f.repeat is None and f.compressed is None \
                and f.type.prefix is None and f.type.terminator is None:
            if f.type.text:
                return len(val.encode(f.type.text))
            return len(val)
        return None

    def _derived(self, draw: Callable, rec: ir.Record, f: ir.Field, env: dict,
                 tags: dict, deferred: list) -> None:
        """A field outside the model: note what later expressions may read of it."""
        if f.const is not None:
            env[f.name] = f.const
        elif f.reserved:
            env[f.name] = 0
        elif f.derived_from is not None and f.derived_from[0] == "count":
            lo, hi = 0, MAX_ITEMS
            if f.valid is not None:
                lo = max(lo, f.valid[0] if f.valid[0] is not None else lo)
                hi = min(hi, f.valid[1] if f.valid[1] is not None else hi)
            cands = list(range(lo, hi + 1))
            if not cands:
                raise Unsupported(f"{rec.name}.{f.name}: count range {f.valid} is empty")
            if f.name in tags:
                cands = [c for c in cands if c in tags[f.name]] or cands
            n = self._pick(draw, cands, f, env)
            env[f.name] = n
        elif f.value is not None:
            try:
                env[f.name] = self.ev(f.value, env)
            except _Unknown:
                pass  # computed from later fields: the encoder writes it
        for a in f.asserts:
            deferred.append((f, a))

    def _pick(self, draw: Callable, cands: list, f: ir.Field, env: dict) -> Any:
        """Draw one of ``cands`` that satisfies the field's asserts given ``env``."""
        if not f.asserts:
            return draw(st.sampled_from(cands))
        good = []
        for c in cands:
            trial = _Env(env)
            trial[f.name] = c
            if self._meets(f.asserts, trial):
                good.append(c)
        if not good:
            self.reject(f"{f.name}: no candidate meets its asserts")
        return draw(st.sampled_from(good))

    # -- fields -----------------------------------------------------------------------
    def _draw_field(self, draw: Callable, rec: ir.Record, f: ir.Field, env: dict,
                    tags: dict, path: str, sites: list[Site],
                    local_sites: list) -> tuple[Any, Any]:
        """(model value, what expressions see of it)."""
        if f.repeat is not None:
            return self._draw_repeat(draw, rec, f, env, path, sites, local_sites)
        val, sval = self._draw_one(draw, rec, f, f.type, env, tags, path, sites, local_sites,
                                   top=True)
        return val, sval

    def _draw_repeat(self, draw: Callable, rec: ir.Record, f: ir.Field, env: dict,
                     path: str, sites: list[Site], local_sites: list) -> tuple[Any, Any]:
        r = f.repeat
        assert r is not None
        fixed_count = None
        if r.count is not None:
            n = self._ev_or_unsupported(r.count, env, rec, f)
            if not isinstance(n, int) or n < 0 or n > MAX_COUNT:
                self.reject(f"{rec.name}.{f.name}: count {r.count.source!r} is {n!r}")
            derived = r.count.simple_name() is not None and any(
                g.name == r.count.simple_name() and g.derived_from is not None
                for g in rec.fields)
            fixed_count = None if derived else n
        elif r.until_item is not None:
            n = draw(st.integers(1, MAX_ITEMS))  # the last item ends the list
        else:
            n = draw(st.integers(0, MAX_ITEMS))
        forced = _forced_fields(r.until_item) if r.until_item is not None else {}
        items, svals = [], []
        etype, chained = f.type, f.chain is not None and f.chain.decoded
        if chained:  # each item's param: the previous item's decoded value (``first``)
            env = _Env(env)
            env["_chain"] = self._ev_or_unsupported(f.chain.first, env, rec, f)
            etype = dataclasses.replace(f.type, args=tuple(
                a for a in f.type.args if a[0] != f.chain.param)
                + ((f.chain.param, parse("_chain")),))
        # a test other than ``_item.FIELD == CONSTANT`` (``sum(_item.name) == 0``): the
        # last item is tried with the fields the test reads at zero, then drawn freely;
        # any item is redrawn until the test holds on the last one only
        tries = [forced]
        if r.until_item is not None and not forced:
            zeros = dict.fromkeys(_item_reads(r.until_item), _ZERO)
            tries = ([zeros] if zeros else []) + [{}] * RETRIES
        for i in range(n):
            last = i == n - 1
            n0, l0 = len(sites), len(local_sites)
            for k, force_now in enumerate(tries if last else [{}] * len(tries)):
                if k:  # a redraw: forget what the thrown-away item added
                    del sites[n0:], local_sites[l0:]
                self._force = force_now
                v, s = self._draw_one(draw, rec, f, etype, env, {}, f"{path}[{i}]", sites,
                                      local_sites, top=False)
                self._force = {}
                if r.until_item is None:
                    break
                trial = _Env(env)
                trial["_item"] = s
                if bool(self._ev_or_unsupported(r.until_item, trial, rec, f)) == last:
                    break
            else:
                self.reject(f"{rec.name}.{f.name}: until_item holds on an item before "
                            "the last, or not on the last")
            if chained:
                env["_chain"] = getattr(v, f.chain.source)
            if r.until is not None and v == r.until:
                assume(False)
            items.append(v)
            svals.append(s)
        value: Any = items
        if f.framing is not None:  # the records, with the pages lacing keeps
            value = framed_value(self, draw, rec, f, items, path)
        if f.view == "numpy":
            value = self._numpy(f, items)
        if fixed_count is not None and f.view is None:
            self._count_sites(f, path, items, local_sites)
        if r.until is not None and f.view is None:
            local_sites.append((f, Site(path, "terminator",
                                        f"an item equal to the terminator {r.until}",
                                        lambda items=items, u=r.until: items.append(u))))
        return value, svals

    def _count_sites(self, f: ir.Field, path: str, items: list, local_sites: list) -> None:
        if items:
            local_sites.append((f, Site(path, "count", f"one item fewer than the count "
                                        f"{f.repeat.count.source!r}",
                                        lambda items=items: items.pop())))
            local_sites.append((f, Site(path, "count", f"one item more than the count "
                                        f"{f.repeat.count.source!r}",
                                        lambda items=items: items.append(
                                            copy.deepcopy(items[-1])))))

    def _numpy(self, f: ir.Field, items: list) -> Any:
        import numpy as np  # noqa: PLC0415

        from ..generator.layout import numpy_code, record_dtype  # noqa: PLC0415

        code = numpy_code(f.type, self.family)
        if code is not None:
            return np.array(items, dtype=code)
        t = f.type
        if isinstance(t, ir.RefT) and t.kind == "record":
            dt = record_dtype(self.family.records[t.target], self.family)
            if dt is not None:
                rows = [tuple(getattr(v, n) for n, _ in dt) for v in items]
                return np.array(rows, dtype=dt)
        raise Unsupported(f"{f.path or f.name}: numpy view of {t!r}")

    def _draw_one(self, draw: Callable, rec: ir.Record, f: ir.Field, t: ir.Type, env: dict,
                  tags: dict, path: str, sites: list[Site], local_sites: list,
                  top: bool) -> tuple[Any, Any]:
        conv = f.convert
        if isinstance(t, ir.RefT) and t.kind == "alias":
            alias = self.family.aliases[t.target]
            conv = conv or alias.convert
            t = alias.base
        if isinstance(t, (ir.IntT, ir.VarintT)):
            return self._draw_int(draw, rec, f, t, env, tags, path, local_sites, top, conv)
        if isinstance(t, ir.FloatT):
            v = draw(st.floats(width=t.bits, allow_nan=False))
            return v, v
        if isinstance(t, ir.BytesT):
            self._tags = tags
            return self._draw_bytes(draw, rec, f, t, env, path, local_sites, top)
        if isinstance(t, ir.RefT) and t.kind == "enum":
            return self._draw_enum(draw, f, t, tags, top, env)
        if isinstance(t, ir.RefT) and t.kind == "flags":
            return self._draw_flags(draw, t)
        if isinstance(t, ir.RefT) and t.kind == "record":
            sub = self.family.records[t.target]
            params = self._sub_params(draw, sub, t.args, rec, env)
            out = self._draw_sub(draw, sub, params, path, sites)
            self._last_sub = (sub.name, params)
            return out
        if isinstance(t, ir.SwitchT):
            return self._draw_switch(draw, rec, f, t, env, path, sites)
        raise Unsupported(f"{rec.name}.{f.name}: type {type(t).__name__}")

    def _sub_params(self, draw: Callable, sub: ir.Record, args: tuple, caller: ir.Record,
                    env: dict) -> dict[str, Any]:
        given = dict(args)
        out: dict[str, Any] = {}
        for p in sub.params.values():
            if p.name in given:
                out[p.name] = self._ev_or_unsupported(given[p.name], env, caller,
                                                      ir.Field(p.name, ir.PaddingT(1)))
            elif p.name in caller.params and p.name in env:
                out[p.name] = env[p.name]
            elif p.default is not None:
                out[p.name] = p.default
            else:
                out.update({k: v for k, v in self.draw_params(draw, sub).items()
                            if k == p.name})
        return out

    def _draw_switch(self, draw: Callable, rec: ir.Record, f: ir.Field, t: ir.SwitchT,
                     env: dict, path: str, sites: list[Site]) -> tuple[Any, Any]:
        tag = self._ev_or_unsupported(t.on, env, rec, f)
        target: str | None = None
        matched = False
        for key, _label, r in t.cases:
            if _same_key(key, tag):
                target, matched = r, True
                break
        if not matched:
            if t.default == "error":
                self.reject(f"{rec.name}.{f.name}: tag {t.on.source!r} = {tag!r} has no case")
            if t.default == "bytes":
                exact = None
                if f.size is not None and "_remaining" not in f.size.names:
                    try:
                        exact = self.ev(f.size, env)
                    except _Unknown:
                        exact = None
                if exact is not None:
                    if not isinstance(exact, int) or not 0 <= exact <= MAX_SIZE:
                        self.reject(f"{rec.name}.{f.name}: size {f.size.source!r} is {exact}")
                    v = draw(st.binary(min_size=exact, max_size=exact))
                else:
                    v = draw(st.binary(max_size=MAX_BYTES))
                return v, v
            target = t.default
        if target is None:
            return None, None
        sub = self.family.records[target]
        params = self._sub_params(draw, sub, t.args, rec, env)
        out = self._draw_sub(draw, sub, params, path, sites)
        self._last_sub = (sub.name, params)
        return out

    def _draw_int(self, draw: Callable, rec: ir.Record, f: ir.Field, t: Any, env: dict,
                  tags: dict, path: str, local_sites: list, top: bool,
                  conv: str | None) -> tuple[Any, Any]:
        if isinstance(t, ir.VarintT):
            lo, hi = numbers.kind_bounds(t)
        else:
            lo, hi = t.lo, t.hi
        if conv == "zigzag":
            lo, hi = 0, hi  # stored unsigned; the model holds the signed value
        vlo, vhi = lo, hi
        if top and f.valid is not None:
            vlo = max(lo, f.valid[0]) if f.valid[0] is not None else lo
            vhi = min(hi, f.valid[1]) if f.valid[1] is not None else hi
        if top and f.name in tags:
            cands = [k for k in tags[f.name] if isinstance(k, int) and vlo <= k <= vhi]
            if not cands:
                raise Unsupported(f"{rec.name}.{f.name}: no case key fits the tag's range")
            raw = self._pick(draw, cands, f, env) if f.asserts else draw(st.sampled_from(cands))
        elif top and f.asserts:
            raw = self._draw_asserted(draw, f, env, vlo, vhi)
        elif top and (fwd := self._forward_constants(rec, f, vlo, vhi)):
            raw = draw(st.one_of(st.sampled_from(fwd), _int_strategy(vlo, vhi)))
        else:
            raw = draw(_int_strategy(vlo, vhi))
        value = raw
        if conv is not None:
            spec = registry_mod.REGISTRY.numeric(conv)
            if not spec.raw_model:
                try:
                    value = spec.decode(raw)
                except Exception:  # noqa: BLE001 - a raw value outside the kind's domain
                    assume(False)
        if conv is None and top:
            self._int_sites(f, path, lo, hi, local_sites)
        return value, value

    def _draw_asserted(self, draw: Callable, f: ir.Field, env: dict, lo: int, hi: int) -> int:
        """An integer the field's asserts accept: a free draw, else a value the asserts
        name (their constants and the fields they compare with, plus and minus one)."""
        raw = draw(_int_strategy(lo, hi))
        cands = [raw]
        for a in f.asserts:
            for c in _constants(a.check):
                cands += [c, c - 1, c + 1]
            for n in a.check.names:
                v = env.get(n) if n != f.name else None
                if isinstance(v, int) and not isinstance(v, bool):
                    cands += [v, v - 1, v + 1]
        for a in f.asserts:
            for other in _equated(a.check, f.name):
                try:
                    v = self.ev(other, env)
                except _Unknown:
                    continue
                if isinstance(v, int) and not isinstance(v, bool):
                    cands += [v, v + 1, v - 1]
        cands += [lo, 1, 0, hi]
        for c in cands:
            if not (isinstance(c, int) and lo <= c <= hi):
                continue
            trial = _Env(env)
            trial[f.name] = c
            if self._meets(f.asserts, trial):
                return c
        self.reject(f"{f.name}: no integer found that meets its asserts")
        return raw

    def _int_sites(self, f: ir.Field, path: str, lo: int, hi: int, local_sites: list) -> None:
        bad = [hi + 1]
        if lo == 0:
            bad.append(-1)
        for b in bad:
            local_sites.append((f, _AttrSite(path, "range", f"{b} outside [{lo}, {hi}]",
                                             f.name, b)))
        if f.valid is not None:
            if f.valid[1] is not None and f.valid[1] < hi:
                local_sites.append((f, _AttrSite(path, "valid",
                                                 f"{f.valid[1] + 1} above valid max",
                                                 f.name, f.valid[1] + 1)))
            if f.valid[0] is not None and f.valid[0] > lo:
                local_sites.append((f, _AttrSite(path, "valid",
                                                 f"{f.valid[0] - 1} below valid min",
                                                 f.name, f.valid[0] - 1)))

    def _draw_enum(self, draw: Callable, f: ir.Field, t: ir.RefT, tags: dict, top: bool,
                   env: dict) -> tuple[Any, Any]:
        e = self.family.enums[t.target]
        cls = self._enum_cls(e.name)
        members = [m for m in e.members if m.value not in e.retired]
        if top and f.name in tags:
            keys = tags[f.name]
            allowed = []
            for m in members:
                if any(_same_key(k, m.value) or k == ("codec", m.name) for k in keys):
                    allowed.append(m)
            members = allowed
        if not members:
            assume(False)
        vals = [getattr(cls, m.name) if not e.open else m.value for m in members]
        v = self._pick(draw, vals, f, env) if top and f.asserts else draw(st.sampled_from(vals))
        return v, v

    def _draw_flags(self, draw: Callable, t: ir.RefT) -> tuple[Any, Any]:
        fd = self.family.flags[t.target]
        cls = getattr(self.module, camel(fd.name))
        kwargs = {}
        for b in fd.bits:
            if b.enum is not None:
                e = self.family.enums[b.enum]
                ecls = self._enum_cls(e.name)
                ms = [m for m in e.members if m.value < (1 << b.width)
                      and m.value not in e.retired]
                if not ms:
                    assume(False)
                m = draw(st.sampled_from(ms))
                kwargs[b.name] = m.value if e.open else getattr(ecls, m.name)
            elif b.width == 1:
                kwargs[b.name] = draw(st.booleans())
            else:
                kwargs[b.name] = draw(st.integers(0, (1 << b.width) - 1))
        v = cls(**kwargs)
        return v, v

    def _draw_bytes(self, draw: Callable, rec: ir.Record, f: ir.Field, t: ir.BytesT,
                    env: dict, path: str, local_sites: list, top: bool) -> tuple[Any, Any]:
        exact: int | None = None
        if t.size is not None and t.prefix is None and not t.eos:
            if "_remaining" in t.size.names:
                exact = None
            else:
                try:
                    exact = self.ev(t.size, env)
                except _Unknown:
                    exact = None  # a derived size: the encoder writes the length
                if exact is not None and (not isinstance(exact, int) or exact < 0
                                          or exact > MAX_SIZE):
                    self.reject(f"{f.name}: size {t.size.source!r} is {exact!r}")
        size_expr = f.size if top else None
        if size_expr is not None and exact is None and "_remaining" not in size_expr.names:
            try:
                exact = self.ev(size_expr, env)
            except _Unknown:
                exact = None
        term = t.terminator
        keys = [k for k in self._tags.get(f.name, []) if isinstance(k, bytes)] if top else []
        if keys and not t.text:
            v = draw(st.sampled_from(keys))
            return v, v
        if t.text:
            alphabet = st.characters(min_codepoint=32, max_codepoint=126) if (
                t.text == "ascii" or exact is not None) else st.characters(
                blacklist_categories=("Cs",))
            if exact is not None:
                v = draw(st.text(alphabet, min_size=exact, max_size=exact))
            else:
                v = draw(st.text(alphabet, max_size=MAX_BYTES))
            if term is not None and term in v.encode(t.text):
                assume(False)
            if exact is not None and top:
                local_sites.append((f, _AttrSite(path, "length", f"{exact + 1} characters "
                                                 f"for a size of {exact}", f.name, v + "a")))
            if t.text == "ascii" and top:
                local_sites.append((f, _AttrSite(path, "text", "a non-ASCII character",
                                                 f.name, "\u00e9" + v[1:])))
            if term is not None and top:
                local_sites.append((f, _AttrSite(path, "terminator", "contains its terminator",
                                                 f.name, v + term.decode("latin-1"))))
            return v, v
        span = self._size_range(rec, f) if top and exact is None and not t.text else None
        if exact is not None:
            v = draw(st.binary(min_size=exact, max_size=exact))
        elif span is not None:  # a derived size with a valid range: the content fits it
            v = draw(st.binary(min_size=span[0], max_size=max(span[0], min(span[1],
                                                                         MAX_BYTES))))
        else:
            v = draw(st.binary(max_size=MAX_BYTES))
        if top and f.asserts:  # the draw, else all zeros or empty, if the rules want that
            for c in (v, bytes(len(v)), b"" if exact is None and span is None else v):
                trial = _Env(env)
                trial[f.name] = c
                if self._meets(f.asserts, trial):
                    v = c
                    break
        if term is not None and term in v:
            assume(False)
        if span is not None:  # content too large (small) for its size field's valid range
            if span[1] < MAX_SIZE:
                local_sites.append((f, _AttrSite(path, "valid", f"{span[1] + 1} bytes, above "
                                                 "the valid range of its size", f.name,
                                                 bytes(span[1] + 1))))
            if span[0] > 0:
                local_sites.append((f, _AttrSite(path, "valid", f"{span[0] - 1} bytes, below "
                                                 "the valid range of its size", f.name,
                                                 bytes(span[0] - 1))))
        if exact is not None and top:
            local_sites.append((f, _AttrSite(path, "length", f"{exact + 1} bytes for a size "
                                             f"of {exact}", f.name, v + b"\0")))
            if exact > 0:
                local_sites.append((f, _AttrSite(path, "length", f"{exact - 1} bytes for a "
                                                 f"size of {exact}", f.name, v[:-1])))
        if term is not None and top:
            local_sites.append((f, _AttrSite(path, "terminator", "contains its terminator",
                                             f.name, v + term)))
        return v, v


    @staticmethod
    def _size_range(rec: ir.Record, f: ir.Field) -> tuple[int, int] | None:
        """The lengths of ``f`` whose derived size field is inside its ``valid`` range."""
        if f.repeat is not None or f.compressed is not None:
            return None
        size = next((g for g in rec.fields if g.derived_from == ("size", f.name)), None)
        if size is None or size.valid is None:
            return None
        off = size.derived_offset or 0
        lo = 0 if size.valid[0] is None else max(0, size.valid[0] - off)
        hi = MAX_SIZE if size.valid[1] is None else size.valid[1] - off
        if hi < lo:
            raise Unsupported(f"{rec.name}.{f.name}: no length fits {size.name}'s range")
        return lo, hi


class _AttrSite(Site):
    """A site that sets one attribute of the record value drawn around it."""

    def __init__(self, path: str, kind: str, detail: str, attr: str, bad: Any) -> None:
        self.attr = attr
        self.bad = bad
        self.owner: Any = None
        super().__init__(path, kind, detail, self._set)

    def _set(self) -> None:
        setattr(self.owner, self.attr, self.bad)


def bind_sites(value: Any, sites: list[Site]) -> None:
    """Attach attribute sites to the record object that owns them (paths are unique)."""
    for s in sites:
        if isinstance(s, _AttrSite) and s.owner is None:
            s.owner = _owner(value, s.path)


def _owner(value: Any, path: str) -> Any:
    parts = _split(path)[1:-1]
    obj = value
    for p in parts:
        if isinstance(p, int):
            obj = obj[p]
        else:
            obj = getattr(obj, p)
    return obj


def _split(path: str) -> list[str | int]:
    out: list[str | int] = []
    for seg in path.split("."):
        name, _, rest = seg.partition("[")
        out.append(name)
        while rest:
            idx, _, rest = rest.partition("]")
            out.append(int(idx))
            rest = rest[1:] if rest.startswith("[") else rest
    return out


def _same_key(key: Any, tag: Any) -> bool:
    if isinstance(key, tuple):
        return False
    if isinstance(key, bytes) or isinstance(tag, bytes):
        return isinstance(key, bytes) and isinstance(tag, bytes) and key == tag
    if isinstance(tag, enum.Enum):
        tag = tag.value
    return key == tag and type(key) is not bool or (isinstance(key, bool) and key is tag)


def _constants(expr: ir.Expr) -> list[int]:
    import ast  # noqa: PLC0415

    return [n.value for n in ast.walk(expr.tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, int)
            and not isinstance(n.value, bool)]


def _int_strategy(lo: int, hi: int) -> st.SearchStrategy[int]:
    small_lo, small_hi = max(lo, 0), min(hi, SMALL)
    if small_lo <= small_hi and (lo, hi) != (small_lo, small_hi):
        return st.one_of(st.integers(small_lo, small_hi), st.integers(lo, hi))
    return st.integers(lo, hi)


def _equated(expr: ir.Expr, name: str) -> list[ir.Expr]:
    """The sides compared with ``name`` in ``expr`` (``artifact == descriptor.artifact``
    gives ``descriptor.artifact``): the values an assert most likely wants."""
    import ast  # noqa: PLC0415

    from ..generator.expr import parse  # noqa: PLC0415

    out = []
    for node in ast.walk(expr.tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            for a, b in ((left, right), (right, left)):
                if isinstance(a, ast.Name) and a.id == name and not (
                        isinstance(b, ast.Name) and b.id == name):
                    try:
                        out.append(parse(ast.unparse(b)))
                    except Exception:  # noqa: BLE001 - not an expression of the language
                        continue
    return out


def _forced_fields(expr: ir.Expr) -> dict[str, Any]:
    """``{FIELD: CONSTANT}`` for each ``_item.FIELD == CONSTANT`` test in ``expr``: what
    the last item of a ``repeat: {until_item: ...}`` is drawn with."""
    import ast  # noqa: PLC0415

    out: dict[str, Any] = {}
    for node in ast.walk(expr.tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 \
                and isinstance(node.ops[0], ast.Eq):
            for a, b in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
                if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) \
                        and a.value.id == "_item" and isinstance(b, ast.Constant):
                    out[a.attr] = b.value
    return out


def _item_reads(expr: ir.Expr) -> list[str]:
    """The fields ``expr`` reads of the item (``_item.FIELD``), in order."""
    import ast  # noqa: PLC0415

    out: list[str] = []
    for node in ast.walk(expr.tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "_item" and node.attr not in out:
            out.append(node.attr)
    return out


def _reads(rec: ir.Record, name: str) -> list[tuple[str, ir.Field, ir.Expr]]:
    """Every expression of ``rec``'s own fields that reads ``name``, with its kind
    (``size`` for a field's exact size, ``assert``, or ``other``)."""
    out = []
    for f in rec.fields:
        exprs: list[tuple[str, ir.Expr | None]] = [
            ("other", f.cond), ("size", f.size), ("other", f.value)]
        if f.repeat is not None:
            exprs += [("other", f.repeat.count), ("other", f.repeat.until_item)]
        t = f.type
        if isinstance(t, ir.BytesT):
            exprs.append(("other", t.size))
        if isinstance(t, ir.SwitchT):
            exprs.append(("other", t.on))
        if isinstance(t, (ir.RefT, ir.SwitchT)):
            exprs += [("other", e) for _n, e in t.args]
        if f.compressed is not None:
            c = f.compressed
            exprs += [("other", c.algorithm), ("other", c.when), ("other", c.limit)]
        if f.checksum is not None:
            exprs.append(("other", f.checksum.seed))
        if f.chain is not None:
            exprs.append(("other", f.chain.first))
        exprs += [("assert", a.check) for a in f.asserts]
        out += [(kind, f, e) for kind, e in exprs if e is not None and name in e.names]
    return out


def _eq_side(expr: ir.Expr, name: str) -> ir.Expr | None:
    """``EXPR`` when the whole of ``expr`` is ``name == EXPR`` (either way round) and
    ``EXPR`` does not read ``name``: the rule then gives ``name``'s value."""
    import ast  # noqa: PLC0415

    from ..generator.expr import parse  # noqa: PLC0415

    node = expr.tree
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq)):
        return None
    for a, b in ((node.left, node.comparators[0]), (node.comparators[0], node.left)):
        if isinstance(a, ast.Name) and a.id == name and not any(
                isinstance(n, ast.Name) and n.id == name for n in ast.walk(b)):
            try:
                return parse(ast.unparse(b))
            except Exception:  # noqa: BLE001 - not an expression of the language
                return None
    return None
