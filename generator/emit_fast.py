"""Pass 4a: emit the fast path — specialized Python decoders and encoders.

Each record layout becomes ``_d_<record><suffix>(mv, pos, end, *params) -> (value, pos)``
and ``_e_<record><suffix>(out, value, *params)``. Consecutive fixed-size fields are
coalesced into one precompiled ``struct.Struct`` run; variable parts slice a memoryview.
Bounds are checked before any read or allocation, and errors unwind with the field path
prepended, so the happy path pays nothing for good error messages.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
import struct
from dataclasses import dataclass

from . import absent, bitfields, byteorder, defaults, emit_framing, ir, lookup_rows
from . import checksum_cover as cover
from . import emit_fast_encode as efe
from . import emit_peek as peek
from .expr import parse
from .fast.astwalk import stmt_lists, walk
from .model import call_args, camel, enum_class, flags_class
from .runtime_names import (
    chain_anchor,
    checksum_call,
    codec_table,
    intkind_binding,
    numeric_binding,
)


@dataclass
class Spans:
    """Field names whose start/end offsets (or plain bytes) a checksum needs."""

    s: set = None
    e: set = None
    plain: set = None

    def __post_init__(self) -> None:
        self.s, self.e, self.plain = set(), set(), set()

    def __contains__(self, name: str) -> bool:
        return name in self.s or name in self.e or name in self.plain


@dataclass
class Item:
    """One slot of a fixed run: a field value, a length prefix or a repeat count."""

    field: ir.Field
    role: str  # value | prefix | count
    code: str
    size: int
    local: str


def _encode_call(encoding: str) -> str:
    """``.encode()`` for UTF-8 (the default: no argument to parse), else with the name."""
    return ".encode()" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") \
        else f".encode({encoding!r})"


class FastEmitter:
    """Emit decoder and encoder source for every record layout of one family."""

    def __init__(self, family: ir.Family) -> None:
        self.family = family
        self.consts: list[str] = []
        self._const_ids: dict[str, str] = {}
        self.min_sizes: dict[str, int] = {}
        self.deferred: dict[str, list[ir.Field]] = {}
        self.lay_name = ""
        self._inline_stack: frozenset[str] = frozenset()  # records being inlined (no recursion)
        self._inline_src: dict[tuple, tuple | None] = {}  # callee template per context
        self._reach: dict[str, frozenset[str]] = {}
        self._twins: dict[str, bool] = {}  # record -> has an optimistic twin
        self._no_twin = False
        # (record, message) for a schema asking what the emitter cannot give (``rows``)
        self.problems: list[tuple[ir.Record, str]] = []

    # -- shared helpers ------------------------------------------------------------
    def const(self, prefix: str, source: str) -> str:
        if source in self._const_ids:
            return self._const_ids[source]
        name = f"_{prefix}{len(self._const_ids)}"
        self._const_ids[source] = name
        self.consts.append(f"{name} = {source}")
        return name

    def ck_width(self, t: ir.Type) -> int:
        """The width of a checksum's field: a fixed-size scalar or a fixed-width kind."""
        if isinstance(t, ir.VarintT):
            return t.fixed
        return self.scalar_code(t)[1]

    def ck_packers(self, t: ir.Type):
        """(pack(value), pack_into(at, value)) sources writing a checksum's field."""
        if isinstance(t, ir.VarintT):  # a fixed-width kind (ASCII digits)
            b, w = intkind_binding(t), t.fixed
            return (lambda v: f"{b}.encode({v})",
                    lambda at, v: f"out[{at}:{at} + {w}] = {b}.encode({v})")
        sc = self.scalar_code(t)
        st = self.const("S", f"struct.Struct({('<' if sc[2] == 'le' else '>') + sc[0]!r})")
        return (lambda v: f"{st}.pack({v})", lambda at, v: f"{st}.pack_into(out, {at}, {v})")

    def base_int(self, t: ir.Type) -> ir.IntT | None:
        if isinstance(t, ir.IntT):
            return t
        if isinstance(t, ir.RefT) and t.kind in ("enum", "flags", "alias"):
            return byteorder.base_of(self.family, t)  # in the layout's byte order
        return None

    def scalar_code(self, t: ir.Type) -> tuple[str, int, str] | None:
        """(struct code, size, endian) for a runnable scalar type, else None."""
        it = self.base_int(t)
        if it is not None:
            return (it.code or f"{it.size}s", it.size, it.endian)
        if isinstance(t, ir.FloatT):
            return (t.code, t.size, t.endian)
        if isinstance(t, ir.BytesT) and not t.text and t.size is not None:
            c = t.size.constant()
            if isinstance(c, int) and not isinstance(c, bool):
                return (f"{c}s", c, "le")
        return None

    def min_size(self, rec_name: str) -> int:
        """A lower bound on a record's encoded size (for allocation checks)."""
        if rec_name in self.min_sizes:
            return self.min_sizes[rec_name]
        self.min_sizes[rec_name] = 0
        rec = self.family.records[rec_name]
        sizes = []
        for lay in rec.layouts:
            total = 0
            for f in lay.fields:
                if f.cond is not None or f.compressed is not None or f.peek:
                    continue
                total += self.field_min(f)
            sizes.append(total)
        self.min_sizes[rec_name] = min(sizes) if sizes else 0
        return self.min_sizes[rec_name]

    def field_min(self, f: ir.Field) -> int:
        if f.repeat is not None:
            return f.repeat.prefix.size if f.repeat.prefix else 0
        return self.type_min(f.type)

    def type_min(self, t: ir.Type) -> int:
        sc = self.scalar_code(t)
        if sc:
            return sc[1]
        if isinstance(t, ir.BytesT):
            return t.prefix.size if t.prefix else 0
        if isinstance(t, ir.VarintT):
            return 1
        if isinstance(t, ir.RefT) and t.kind == "record":
            return self.min_size(t.target)
        if isinstance(t, ir.SwitchT):
            mins = [self.min_size(r) for _, _, r in t.cases if r]
            return min(mins) if mins and all(r for _, _, r in t.cases) else 0
        return 0

    def runnable(self, f: ir.Field) -> bool:
        if f.cond is not None or f.compressed is not None or f.size is not None or f.peek:
            return False
        if self.uses_position(f):
            return False  # _offset/_remaining are taken at this field, not at a run's start
        if f.convert is not None:  # converted after the read (decode_field)
            return False
        if f.repeat is not None:
            return False
        return self.scalar_code(f.type) is not None

    @staticmethod
    def uses_position(f: ir.Field) -> bool:
        exprs = [f.value] + [a.check for a in f.asserts]
        return any(e is not None and e.names & {"_offset", "_remaining"} for e in exprs)

    def call_args(self, callee: ir.Record, args: tuple, caller: ir.Record, res) -> str:
        return call_args(callee, args, caller, res)

    def model_names(self, rec: ir.Record) -> list[str]:
        return [f.name for f in rec.model_fields]

    # -- inlining small sub-records at their call sites ----------------------------
    INLINE_MAX_LINES = 160  # a callee body longer than this stays a call (code size)

    def _sub_emitter(self, name: str) -> FastEmitter:
        """A fresh emitter (per-record state is not clobbered) sharing the constants."""
        sub = FastEmitter(self.family)
        sub.consts, sub._const_ids, sub.min_sizes = self.consts, self._const_ids, self.min_sizes
        sub._inline_src, sub._reach = self._inline_src, self._reach
        sub._inline_stack = self._inline_stack | {name}
        return sub

    def inline_call(self, kind: str, callee: ir.Record, args: str, target: str) -> list[str] | None:
        """The body of ``_d_``/``_e_<callee>`` (``kind`` "d"/"e") rewritten to run in the
        caller: its locals renamed apart, its parameters bound to the call's arguments,
        its final ``return value, pos`` turned into ``target = value``. One Python call
        less per sub-record; the error paths are the caller's try/prefix as for a call.
        None when the callee is recursive, versioned, parameter-assigning or large."""
        name = callee.name
        if name in self._inline_stack or callee.version_from or len(callee.layouts) != 1:
            return None
        # the template depends on the enclosing inlines only where they are reachable
        # from the callee (a cycle): elsewhere one template serves every site
        key = (kind, name, self._inline_stack & self._reachable(name))
        if key not in self._inline_src:  # prepared once per (callee, enclosing inlines)
            self._inline_src[key] = self._inline_template(kind, callee)
        tpl = self._inline_src[key]
        if tpl is None:
            return None
        bound_params, lines = tpl
        call = ast.parse(f"_f({'_v' if kind == 'e' else 'mv'}{args})").body[0].value
        passed = call.args[1:]
        if len(passed) != len(bound_params):
            return None
        px = f"_{name}__"
        pre: list[str] = []
        text = "\n".join(lines)
        for p, expr in zip(bound_params, passed, strict=True):
            if isinstance(expr, ast.Name) or (isinstance(expr, ast.Constant)
                                              and not isinstance(expr.value, str | bytes)):
                val = ast.unparse(expr)
            else:  # evaluated once, before the body, as the call did
                val = px + p
                pre.append(f"{val} = {ast.unparse(expr)}")
            text = re.sub(rf"\b__P_{p}__\b", lambda _m, val=val: val, text)
        text = text.replace("__TARGET__", target)
        return pre + text.splitlines()

    def _reachable(self, name: str) -> frozenset[str]:
        """Records the decoder/encoder of ``name`` may call, transitively (cached)."""
        got = self._reach.get(name)
        if got is not None:
            return got
        seen: set[str] = set()
        todo = [name]
        while todo:
            rec = self.family.records.get(todo.pop())
            if rec is None:
                continue
            for lay in rec.layouts:
                for f in lay.fields:
                    t = f.type
                    outs = []
                    if isinstance(t, ir.RefT) and t.kind == "record":
                        outs = [t.target]
                    elif isinstance(t, ir.SwitchT):
                        outs = [r for _, _, r in t.cases if r] + [t.default]
                    for r in outs:
                        if r in self.family.records and r not in seen:
                            seen.add(r)
                            todo.append(r)
        got = self._reach[name] = frozenset(seen)
        return got

    def _inline_template(self, kind: str, callee: ir.Record) -> tuple[list[str], list[str]] | None:
        """``(params, body lines)`` of ``callee`` ready for :meth:`inline_call`: locals
        prefixed, each parameter a ``__P_<name>__`` placeholder, the result assigned to
        ``__TARGET__``; None when it cannot be inlined."""
        sub = self._sub_emitter(callee.name)
        lay = callee.layouts[0]
        src = sub.decoder(callee, lay) if kind == "d" else sub.encoder(callee, lay)
        if len(src) > self.INLINE_MAX_LINES:
            if kind != "d":
                return None
            fn = self._first_case_only(ast.parse("\n".join(src)).body[0], callee.name)
            if fn is None or len(ast.unparse(fn).splitlines()) > self.INLINE_MAX_LINES:
                return None
        else:
            fn = ast.parse("\n".join(src)).body[0]
        fixed = {"mv", "pos", "end"} if kind == "d" else {"out"}
        params = [a.arg for a in fn.args.args]
        bound_params = params[3:] if kind == "d" else params[1:]
        nodes = [n for s in fn.body for n in walk(s)]
        stores = {n.id for n in nodes if isinstance(n, ast.Name)
                  and not isinstance(n.ctx, ast.Load)}
        names = {n.id for n in nodes if isinstance(n, ast.Name)}
        nested = (ast.Global, ast.Nonlocal, ast.Lambda, ast.FunctionDef, ast.Yield)
        if stores & set(bound_params) or any(isinstance(n, nested) for n in nodes) \
                or any("__P_" in n or n == "__TARGET__" for n in names):
            return None
        returns = [n for n in nodes if isinstance(n, ast.Return)]
        body = list(fn.body)
        if kind == "d":
            tails = _tail_returns(body)
            if tails is None or {id(r) for r in returns} != {id(r) for r in tails}:
                return None
        elif returns:
            return None
        px = f"_{callee.name}__"
        rename = {n: px + n for n in stores if n not in fixed}
        rename.update({p: f"__P_{p}__" for p in bound_params})
        for n in nodes:
            if isinstance(n, ast.Name) and n.id in rename:
                n.id = rename[n.id]
        if kind == "d":
            _returns_to_target(body)
        mod = ast.Module(body=body, type_ignores=[])
        ast.fix_missing_locations(mod)
        return bound_params, ast.unparse(mod).splitlines()

    @staticmethod
    def _first_case_only(fn: ast.FunctionDef, name: str) -> ast.FunctionDef | None:
        """A decoder too large to inline, cut to what its first switch case runs: the
        fields before the switch, the first case, the fields after it; any other tag
        restores ``pos``/``end`` and calls the whole decoder from the record's start.

        The decoders are pure (locals and raises only), so reading the head twice on
        the other cases gives the same value and the same errors; the common case (a
        schema lists it first) pays no call and no frame of the decoder's many locals.
        None when the body has no such switch or cannot be re-entered."""
        body = fn.body
        best = None
        for i, st in enumerate(body):
            if isinstance(st, ast.If) and st.orelse and isinstance(st.test, ast.Compare) \
                    and isinstance(st.test.left, ast.Name) \
                    and [type(o) for o in st.test.ops] == [ast.Eq] \
                    and isinstance(st.test.comparators[0], ast.Constant) \
                    and not _raises(st.body):
                size = st.end_lineno - st.lineno
                if best is None or size > best[1]:
                    best = (i, size)
        if best is None:
            return None
        i = best[0]
        prefix, switch, suffix = body[:i], body[i], body[i + 1:]
        if not suffix or any(isinstance(n, ast.Return) for s in prefix + switch.body
                             for n in walk(s)):
            return None
        if any(isinstance(n, ast.Name) and n.id == "mv" and not isinstance(n.ctx, ast.Load)
               for s in prefix for n in walk(s)):
            return None  # the head replaced the buffer: the call could not start over
        params = "".join(f", {a.arg}" for a in fn.args.args[3:])
        src = (f"def _f(mv, pos, end{params}):\n"
               "    _re_pos, _re_end = pos, end\n"
               "    if _t:\n"
               "        pass\n"
               "    else:\n"
               "        pos, end = _re_pos, _re_end\n"
               f"        return _d_{name}(mv, pos, end{params})\n")
        out = ast.parse(src).body[0]
        fork = out.body[1]
        fork.test = switch.test
        fork.body = list(switch.body) + list(suffix)
        out.body[1:1] = prefix
        return out

    def call_or_inline_decode(self, callee: ir.Record, args: str, target: str, label: str,
                              suffix: str = "") -> list[str]:
        """Decode sub-record ``callee`` into ``target`` (inline when small), prefixing
        any error's path with ``label`` exactly as the call did."""
        body = self.inline_call("d", callee, args, target)
        if body is None:
            body = [f"{target}, pos = _d_{callee.name}{suffix}(mv, pos, end{args})"]
        return ["try:"] + ["    " + x for x in body] + [
            "except DecodeError as _exc:",
            f"    raise _exc.prefixed({label!r}) from None"]

    def call_or_inline_encode(self, callee: ir.Record, args: str, val: str,
                              suffix: str = "") -> list[str]:
        """Encode ``val`` as sub-record ``callee`` (inline when small)."""
        body = self.inline_call("e", callee, f", {val}{args}", "")
        if body is None:
            return [f"_e_{callee.name}{suffix}(out, {val}{args})"]
        return body

    # -- decoding ------------------------------------------------------------------
    def decoder(self, rec: ir.Record, lay: ir.Layout) -> list[str]:
        params = "".join(f", p_{p}" for p in rec.params)
        self.lay_name = rec.name + lay.suffix
        self.cur_rec = rec
        lines = [f"def _d_{rec.name}{lay.suffix}(mv, pos, end{params}):",
                 "    start = pos"]
        spans = self.spans_needed(lay)
        body: list[str] = []
        run: list[Item] = []
        bound: set[str] = set()

        def res(name: str) -> str:
            if name in rec.params:
                return f"p_{name}"
            if name == "_remaining":
                return "(end - pos)"
            if name == "_offset":
                return "(pos - start)"
            return f"f_{name}"

        # a sub-value lacking the attribute (another switch case, an absent optional) is
        # a decode error; a present sub-record that has the field is read directly
        by_name = {f.name: f for f in lay.fields}

        def attr(obj: str, a: str) -> str:
            f = by_name.get(obj[2:]) if obj.startswith("f_") else None
            if f is not None and f.cond is None and f.since is None and f.until is None \
                    and f.repeat is None and isinstance(f.type, ir.RefT) \
                    and f.type.kind == "record" and f.type.target in self.family.records \
                    and a in self.model_names(self.family.records[f.type.target]):
                return f"{obj}.{a}"
            return f"_attr({obj}, {a!r}, pos, {a!r})"

        res.attr = attr  # type: ignore[attr-defined]
        # int(x, base) over bytes that are not digits: a decode error of the field read
        res.call = lambda fn, args: (  # type: ignore[attr-defined]
            f"_int_of({args}, offset=pos, path={getattr(self, '_dec_field', '')!r})")
        self.dec_res = res

        def flush() -> None:
            if run:
                body.extend(self.decode_run(rec, run, spans))
                for it in run:
                    bound.add(it.field.name)
                run.clear()

        self.lay = lay
        for f in lay.fields:
            if f.checksum is not None:
                flush()
            role = self.run_role(f)
            if role is not None and not self.compatible(run, f, role):
                flush()
            if role == "value":
                self.add_run_item(run, f, "value")
                continue
            if role is not None:
                self.add_run_item(run, f, role)
                flush()
                body.extend(self.decode_field(rec, f, res, spans, prefixed=True))
                continue
            flush()
            body.extend(self.decode_field(rec, f, res, spans))
            body += bitfields.extract(self, [f], "f_")  # the model's bit ranges
        flush()
        body += bitfields.virtuals(rec, res, "f_")
        present = {f.name for f in lay.fields} | {p.name for f in lay.fields for p in f.bits} \
            | {v.name for v in rec.virtuals}
        vals = [f"f_{f.name}" if f.name in present else defaults.absent(f, self.family)
                for f in rec.model_fields]
        lines += ["    " + b for b in body]
        lines += ["    " + x for x in self.construct(rec, vals, "_obj")]
        lines.append("    return _obj, pos")
        lines = self.drop_unused_start(lines)
        if not self._inline_stack and not self._no_twin and len(rec.layouts) == 1 \
                and not rec.version_from:
            lines += self.optimistic(rec, lines)
        elif not self._inline_stack and not self._no_twin and lay.order and not rec.version_from:
            lines += self.optimistic(rec, lines, rec.name + lay.suffix)  # one per byte order
        return lines

    OPTIMISTIC_MAX_LINES = 1000  # larger decoders get no optimistic twin (code size)
    ENCODE_CHUNK = 512  # a many-encoder joins its listed pieces when this many are listed

    def has_twin(self, name: str) -> bool:
        """Whether record ``name`` gets an optimistic twin ``_u_<name>`` (decided from
        its checked decoder, built once more without twins)."""
        got = self._twins.get(name)
        if got is None:
            rec = self.family.records.get(name)
            got = False
            # byte order as data: one twin per order's layout, and a dispatcher twin
            target = byteorder.twin_layout(self.family, name)
            if target == "dispatch":
                got = all(self.has_twin(f"{name}_{o}") for o in rec.orders)
            elif target is not None:
                rec, lay = target
                sub = FastEmitter(self.family)
                sub.consts, sub._const_ids, sub.min_sizes = self.consts, self._const_ids, self.min_sizes
                sub._inline_src, sub._reach, sub._twins = self._inline_src, self._reach, self._twins
                sub._no_twin = True
                lines = sub.decoder(rec, lay)
                got = len(lines) <= self.OPTIMISTIC_MAX_LINES and \
                    Optimist({}).eligible(ast.parse("\n".join(lines)).body[0])
            self._twins[name] = got
        return got

    def optimistic(self, rec: ir.Record, lines: list[str], order_name: str = "") -> list[str]:
        """``_u_<record>`` (one record) and ``_m_<record>`` (consecutive records in one
        loop, no call per record) for the checked decoder ``lines``; [] when the
        decoder does something the twin cannot mirror (see :class:`Optimist`)."""
        if len(lines) > self.OPTIMISTIC_MAX_LINES:
            return []
        fn = ast.parse("\n".join(lines)).body[0]
        formats = {}
        for c in self.consts:
            m = re.fullmatch(r"(_S\d+) = struct\.Struct\('([^']*)'\)", c)
            if m:
                formats[m.group(1)] = m.group(2)
        opt = Optimist(formats, self.has_twin)
        if not opt.eligible(fn):
            return []
        opt.transform(fn)
        fuse_reads(fn, formats, lambda fmt: self.const("S", f"struct.Struct({fmt!r})"))
        on_bytes = bytes_slices(fn, lambda: self.const("BD", "bytes.decode"))
        name = rec.name
        params = [a.arg for a in fn.args.args[3:]]
        fn.name = f"_u_{order_name or name}"
        single = ast.unparse(fn).splitlines()
        if on_bytes:  # the buffer's type, once per record here (once per log below)
            single[1:1] = [f"    {_IS_BYTES}"]
        if order_name:  # one order's layout: its dispatcher twin loops (byteorder.py)
            return [""] + single
        # the many-loop: the body once per record, the value appended; struct methods
        # are bound once per log (a local load instead of a global and an attribute)
        ret = fn.body[-1]
        hoisted: set[str] = set()
        nodes = list(walk(fn))
        taken = {n.id for n in nodes if isinstance(n, ast.Name)}
        for n in nodes:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "unpack_from" and isinstance(n.func.value, ast.Name) \
                    and re.fullmatch(r"_S\d+", n.func.value.id) \
                    and f"{n.func.value.id}_unpack_from" not in taken:
                hoisted.add(n.func.value.id)
                n.func = ast.Name(f"{n.func.value.id}_unpack_from", ast.Load())
        body = ast.unparse(ast.Module(body=fn.body[:-1], type_ignores=[])).splitlines()
        value = ast.unparse(ret.value.elts[0])
        ptuple = "(" + "".join(f"{p}, " for p in params) + ")"
        # ``_end``, not ``end``: a section inlined into the body narrows ``end`` while
        # it runs, and a record that fails inside one leaves it narrowed
        # ``_rest`` takes over at the first record the loop cannot read: ``_decode_many``
        # (its value, or its error) for ``decode_many_<r>``, ``_decode_prefix`` (stop
        # there) for ``decode_prefix_<r>``
        fallback = f"_rest(_d_{name}, {name!r}, mv, _rs, _end, {ptuple}, _out)"
        # Loops over records are `while True:` with the end test inside, never
        # `while pos < end:`. CPython 3.11 specializes a function's bytecode after 8
        # calls or unconditional back-jumps; a `while cond:` loop jumps back
        # conditionally, which does not count, so a decoder called once over a large
        # buffer ran its whole loop unspecialized (~1.5x slower). The list loops in
        # in `decode_repeat` follow the same rule.
        loop = [f"def _m_{name}(mv, pos, end{''.join(', ' + p for p in params)}, "
                "_rest=_decode_many):",
                "    _out = []",
                "    _append = _out.append",
                "    _p0 = _rs = pos",
                "    _end = end"] + ([f"    {_IS_BYTES}"] if on_bytes else []) + [
                f"    {h}_unpack_from = {h}.unpack_from" for h in sorted(hoisted)] + [
                "    try:",
                "        while True:",
                "            if pos >= end:",
                "                break",
                "            _rs = pos"]
        loop += ["            " + x for x in body]
        if self.min_size(name) == 0:
            loop += ["            if pos <= _rs:", "                raise IndexError"]
        loop += [f"            _append({value})",
                 "    except Exception:",
                 "        # the checked decoder re-reads the failing record: its error (or value)",
                 f"        return {fallback}",
                 "    if pos > end and pos != _p0:  # the last record ran past the end",
                 "        _out.pop()",
                 f"        return {fallback}",
                 "    return _out"]
        if rec.rows:
            return [""] + single + [""] + loop + self.rows_loop(rec, loop)
        return [""] + single + [""] + loop

    def rows_loop(self, rec: ir.Record, loop: list[str]) -> list[str]:
        """``_r_<record>``: the many-loop ``loop`` building rows, not objects (schema
        ``rows: true``). A record is the tuple of its model fields in order, nested
        records are tuples too, a packed view is its raw bytes; every other value (ints,
        enums, flags, strings, lists) is what the object holds. The loop also lists where
        each record starts, and stops at the first record it does not take, with no
        second reading: ``(rows, starts, stop)``, and the checked decoder says why that
        record stops. [] (with a problem) when a value of the record is built by a call
        the loop cannot turn into a row (a sub-record decoded out of line)."""
        fn = ast.parse("\n".join(loop)).body[0]
        classes = {camel(r.name) for r in self.family.records.values()}
        why = _rows_transform(fn, classes) or lookup_rows.rewrite(
            fn, lookup_rows.item_orders(rec, self.family))
        if why is not None:
            self.problems.append((rec, f"rows: true, but {why}"))
            return []
        fn.name = f"_r_{rec.name}"
        fn.args.defaults = []
        fn.args.args = [a for a in fn.args.args if a.arg != "_rest"]
        return [""] + ast.unparse(ast.fix_missing_locations(fn)).splitlines()

    @staticmethod
    def construct(rec: ir.Record, vals: list[str], target: str) -> list[str]:
        """Build the record's object into ``target``: a new instance with its slots stored
        directly (no ``__init__`` call: measured ~25% cheaper per object, and objects are
        a large share of decode time)."""
        cls = camel(rec.name)
        if not vals:
            return [f"{target} = {cls}()"]
        names = [f.name for f in rec.model_fields]
        return [f"{target} = _new({cls})"] + [
            f"{target}.{n} = {v}" for n, v in zip(names, vals, strict=True)]

    @staticmethod
    def drop_unused_start(lines: list[str]) -> list[str]:
        """Leave out ``start = ...`` (line 2) when no other line reads ``start``: one
        operation less per record on the hot path."""
        if any(re.search(r"\bstart\b", x) for x in lines[2:]):
            return lines
        return lines[:1] + lines[2:]

    @staticmethod
    def plain(f: ir.Field) -> bool:
        return f.cond is None and f.compressed is None and f.size is None

    def add_run_item(self, run: list[Item], f: ir.Field, role: str) -> None:
        if role == "value":
            code, size, endian = self.scalar_code(f.type)
            local = f"f_{f.name}"
        else:
            it = f.type.prefix if role == "prefix" else f.repeat.prefix
            code, size, _endian = it.code or f"{it.size}s", it.size, it.endian
            local = f"n_{f.name}"
        run.append(Item(f, role, code, size, local))

    def run_role(self, f: ir.Field) -> str | None:
        """How ``f`` joins a fixed-size run: its whole value, its length prefix, its count
        prefix, or not at all (None). Decoder, encoder and the Construct path's truncation
        checks group runs by this one rule, so the paths report a cut input alike."""
        if f.bits or absent.sentinel(f) is not None:  # (bit ranges are taken once it is
            return None  # read; a sentinel is tested before the rest is read)
        if self.runnable(f):
            return "value"
        if isinstance(f.type, ir.BytesT) and isinstance(f.type.prefix, ir.IntT) \
                and self.plain(f) and f.repeat is None:
            return "prefix"
        if f.repeat is not None and isinstance(f.repeat.prefix, ir.IntT) and self.plain(f):
            return "count"
        return None

    def compatible(self, run: list[Item], f: ir.Field, role: str) -> bool:
        """A run has one byte order; byte strings fit any run."""
        if role == "value":
            code, _, endian = self.scalar_code(f.type)
        else:
            it = f.type.prefix if role == "prefix" else f.repeat.prefix
            code, endian = it.code or "s", it.endian
        if code.endswith("s"):
            return True
        for other in run:
            oc = other.code
            if not oc.endswith("s") and self.item_endian(other) != endian:
                return False
        return True

    def item_endian(self, item: Item) -> str:
        if item.role == "value":
            return self.scalar_code(item.field.type)[2]
        it = item.field.type.prefix if item.role == "prefix" else item.field.repeat.prefix
        return it.endian

    def spans_needed(self, lay: ir.Layout) -> Spans:
        """Which fields need start (``_s_``) / end (``_e_``) offsets kept for checksums.

        Only the first and last field of each contiguous covered group are tracked.
        """
        spans = Spans()
        order = [f.name for f in lay.fields]
        comp = {f.name for f in lay.fields if f.compressed is not None}
        for i, f in enumerate(lay.fields):
            if f.checksum is None:
                continue
            late = cover.anchor(lay.fields, i) is not None
            if late:  # checked after its place: its own offset is kept
                spans.s.add(f.name)
            group: list[str] = []
            for n in self.covered(lay, i) + [None]:
                own = late and n == f.name  # read as its filler: a piece of its own
                contiguous = (n is not None and n not in comp and group and not own
                              and order.index(n) == order.index(group[-1]) + 1)
                if group and not contiguous:
                    spans.s.add(group[0])
                    spans.e.add(group[-1])
                    group = []
                if n is None:
                    break
                if n in comp:
                    spans.plain.add(n)
                elif own:
                    spans.e.add(n)  # the encoder reads its placeholder as a span
                else:
                    group.append(n)
        return spans

    def covered(self, lay: ir.Layout, index: int) -> list[str]:
        return cover.covered(lay.fields, index)

    def late_checks(self, f: ir.Field) -> list[str]:
        """Checks of the checksums whose last covered field is ``f`` (decode)."""
        out: list[str] = []
        fields = self.lay.fields
        at = next((i for i, x in enumerate(fields) if x is f), None)
        for i, ck in enumerate(fields):
            if ck.checksum is not None and at is not None and cover.anchor(fields, i) == at:
                check = self.checksum_check(ck, f"_s_{ck.name}")
                out += [f"if f_{ck.name} is not None:"] + ["    " + x for x in check] \
                    if ck.cond else check
        return out

    def decode_run(self, rec: ir.Record, run: list[Item], spans: set[str]) -> list[str]:
        endian = "<"
        for it in run:
            if not it.code.endswith("s"):
                endian = "<" if self.item_endian(it) == "le" else ">"
                break
        fmt = endian + "".join(it.code for it in run)
        total = sum(it.size for it in run)
        st = self.const("S", f"struct.Struct({fmt!r})")
        table = []
        off = 0
        for it in run:
            label = it.field.name if it.role == "value" else f"{it.field.name}.length"
            table.append((label, off, it.size))
            off += it.size
        tab = self.const("T", repr(tuple(table)))
        out = [f"if pos + {total} > end:",
               f"    raise _short(pos, end, {tab})"]
        targets = ", ".join(it.local for it in run)
        if fmt[1:] == "B":  # one u8: indexing the buffer gives the int, no tuple
            out.append(f"{targets} = mv[pos]")
        else:
            out.append(f"{targets}{',' if len(run) == 1 else ''} = {st}.unpack_from(mv, pos)")
        rvar = f"_r{st[2:]}"
        at_rvar = len(out)
        out.append(f"{rvar} = pos")
        out.append(f"pos += {total}")
        off = 0
        for it in run:
            f = it.field
            at = f"{rvar} + {off}" if off else rvar
            if f.name in spans.s:
                out.append(f"_s_{f.name} = {at}")
            if f.name in spans.e and it.role == "value":
                out.append(f"_e_{f.name} = {rvar} + {off + it.size}")
            if it.role == "value":
                out.extend(self.post_scalar(rec, f, it, at))
                if f.checksum is not None and not self.is_late(f):
                    out.extend(self.checksum_check(f, at))
                out.extend(self.late_checks(f))
                out.extend(self.assert_lines(rec, f, at, it.local[:-len(f"f_{f.name}")]))
            off += it.size
        if not any(re.search(rf"\b{rvar}\b", x) for x in out[at_rvar + 1:]):
            del out[at_rvar]  # the run's start is not needed by any check or span
        return out

    def assert_lines(self, rec: ir.Record, f: ir.Field, at: str, px: str = "") -> list[str]:
        """Decode-time ``assert`` rules of a field (names resolve to decoded locals)."""
        out: list[str] = []
        for a in f.asserts:
            cls = "UnsupportedError" if a.error == "unsupported" else "ConstraintError"
            src = a.check.render(lambda n: f"p_{n}" if n in rec.params else f"{px}f_{n}")
            out += [f"if not {src}:",
                    f"    raise {cls}({a.message!r}, offset={at}, path={(a.path or f.name)!r}, "
                    f"expected={a.check.source!r}, found={px}f_{f.name})"]
        if out and f.cond is not None:
            out = [f"if {px}f_{f.name} is not None:"] + ["    " + x for x in out]
        return out

    def post_scalar(self, rec: ir.Record, f: ir.Field, it: Item, at: str) -> list[str]:
        """Conversions and checks after a fixed run is unpacked."""
        out: list[str] = []
        loc = it.local
        it_base = self.base_int(f.type)
        if it_base is not None and it.code.endswith("s"):
            order = "little" if it_base.endian == "le" else "big"
            out.append(f"{loc} = int.from_bytes({loc}, {order!r}, signed={it_base.signed})")
        if f.const is not None:
            out += [f"if {loc} != {f.const!r}:",
                    f"    raise ConstraintError('bad magic', offset={at}, path={f.name!r}, "
                    f"expected={f.const!r}, found={loc})"]
        if f.reserved:
            zero = repr(bytes(it.size)) if it.code.endswith("s") and it_base is None else "0"
            out += [f"if {loc} != {zero}:",
                    f"    raise ConstraintError('reserved bytes must be zero', offset={at}, "
                    f"path={f.name!r}, expected={zero}, found={loc})"]
        if f.valid is not None:
            lo, hi = f.valid
            conds = []
            if lo is not None:
                conds.append(f"{loc} < {lo}")
            if hi is not None:
                conds.append(f"{loc} > {hi}")
            out += [f"if {' or '.join(conds)}:",
                    f"    raise ConstraintError('value out of range', offset={at}, "
                    f"path={f.name!r}, expected={f'{lo}..{hi}'!r}, found={loc})"]
        if isinstance(f.type, ir.RefT) and f.type.kind == "enum":
            e = self.family.enums[f.type.target]
            table = f"_{enum_class(e.name).upper()}_BY_VALUE"
            if e.open and it.code == "B":
                # one byte: a 256-slot list (member or the int itself) indexed directly,
                # cheaper than a dict method call per value
                tab = self.const("EB", f"[{table}.get(_i, _i) for _i in range(256)]")
                out.append(f"{loc} = {tab}[{loc}]")
            elif e.open:
                out.append(f"{loc} = {table}.get({loc}, {loc})")
            else:
                out += [f"_v = {table}.get({loc})",
                        "if _v is None:"]
                if e.retired:
                    out += [f"    if {loc} in {tuple(e.retired)!r}:",
                            f"        raise ConstraintError('retired {e.name} value "
                            f"(permanently retired, never reused)', offset={at}, "
                            f"path={f.name!r}, expected={sorted(m.value for m in e.members)!r}, "
                            f"found={loc})"]
                out += [
                        f"    raise ConstraintError('unknown {e.name} value', offset={at}, "
                        f"path={f.name!r}, expected={sorted(m.value for m in e.members)!r}, "
                        f"found={loc})",
                        f"{loc} = _v"]
        if isinstance(f.type, ir.RefT) and f.type.kind == "flags":
            fd = self.family.flags[f.type.target]
            out += [f"if {loc} & {~fd.known_mask & ((1 << fd.base.bits) - 1)}:",
                    f"    raise ConstraintError('undefined {fd.name} bits set', offset={at}, "
                    f"path={f.name!r}, expected='mask {fd.known_mask:#x}', found={loc})",
                    f"{loc} = {flags_class(fd.name)}.from_int({loc})"]
        return out

    def decode_field(self, rec: ir.Record, f: ir.Field, res, spans: set[str],
                     prefixed: bool = False) -> list[str]:
        if f.peek:
            return peek.decode_lines(self, rec, f)
        out: list[str] = []
        name = f.name
        self._dec_field = name  # the path checked expression functions report
        want_span = name in spans
        if f.asserts:
            out.append(f"_a_{name} = pos")
        if name in spans.s and not prefixed:
            out.append(f"_s_{name} = pos")
        inner = self.decode_value(rec, f, res, prefixed)
        if f.chain is not None:
            inner = [f"f__chain = {f.chain.first.render(res)}"] + inner
        if f.convert is not None:
            inner = ["_cva = pos"] + inner + [
                f"f_{name} = _convert_decode({numeric_binding(f.convert)}, f_{name}, _cva, "
                f"{name!r})"]
        sized = self.decode_sized(f, res, inner) if f.size is not None else inner
        if f.compressed is not None:
            # the declared size bounds the *decompressed* bytes (enforced exactly there)
            inner = self.decode_compressed(rec, f, res, inner, sized, want_span)
        else:
            inner = sized
        if f.cond is not None:
            out.append(f"if {f.cond.render(res)}:")
            out += ["    " + x for x in inner]
            out.append("else:")
            out.append(f"    f_{name} = {defaults.absent(f, self.family)}")
            if f.compressed is not None and want_span:
                out.append(f"    _plain_{name} = b''")
        else:
            out += inner
        if name in spans.e:
            out.append(f"_e_{name} = pos")
        if f.checksum is not None and not self.is_late(f):
            check = self.checksum_check(f, f"pos - {self.ck_width(f.type)}")  # its start
            out += [f"if f_{name} is not None:"] + ["    " + x for x in check] if f.cond \
                else check
        out += self.late_checks(f)
        out += self.assert_lines(rec, f, f"_a_{name}")
        return out

    def is_late(self, f: ir.Field, encode: bool = False) -> bool:
        """Whether checksum field ``f`` covers bytes at or after its own place."""
        i = next(i for i, x in enumerate(self.lay.fields) if x is f)
        return cover.anchor(self.lay.fields, i, encode) is not None

    def decode_sized(self, f: ir.Field, res, inner: list[str]) -> list[str]:
        size = f.size.render(res)
        out = [f"_n = {size}",
               "if _n < 0:",
               f"    raise ConstraintError('negative size', offset=pos, path={f.name!r}, "
               "expected='>= 0', found=_n)",
               "if pos + _n > end:",
               f"    raise TruncatedError('section needs ' + str(_n) + ' bytes', offset=pos, "
               f"path={f.name!r}, expected=_n, found=end - pos)",
               f"_outer_end_{f.name} = end",
               "end = pos + _n",
               f"_sec_{f.name} = pos"]
        out += inner
        out += ["if pos != end:",
                f"    raise ConstraintError('section size mismatch', offset=_sec_{f.name}, "
                f"path={f.name!r}, expected=end - _sec_{f.name}, found=pos - _sec_{f.name})",
                f"end = _outer_end_{f.name}"]
        return out

    def chained_type(self, f: ir.Field) -> ir.Type:
        """The element type of a chained repeat: its chain param reads ``_chain``."""
        if f.chain is None:
            return f.type
        args = tuple(a for a in f.type.args if a[0] != f.chain.param)
        return dataclasses.replace(f.type, args=args + ((f.chain.param, parse("_chain")),))

    def chain_read(self, f: ir.Field, buf: str, start: str, stop: str) -> str:
        """Source reading the stored chain value of the item at ``start``..``stop``."""
        if f.chain.decoded:  # the item just decoded (or encoded) is ``_x``
            return f"_x.{f.chain.source}"
        side, k, it = chain_anchor(self.family, f, f.type.order)
        st = self.const("S", f"struct.Struct({('<' if it.endian == 'le' else '>') + it.code!r})")
        at = f"{start} + {k}" if side == "start" else f"{stop} - {k}"
        return f"{st}.unpack_from({buf}, {at})[0]"

    def codecs_const(self, c: ir.Compressed) -> str:
        """Module constant mapping a field's algorithm values to registered codecs."""
        return self.const("CODECS", repr(codec_table(self.family, self.cur_rec, c)))

    def decode_compressed(self, rec: ir.Record, f: ir.Field, res, plain_code: list[str],
                          inline_code: list[str], want_span: bool) -> list[str]:
        c = f.compressed
        lt = c.length
        alg = c.algorithm.render(res)
        cap = (f.size.render(res) if f.size is not None else
               c.limit.render(res) if c.limit is not None else "_DEFAULT_LIMIT")
        expected = f.size.render(res) if f.size is not None else "None"
        codecs = f", codecs={self.codecs_const(c)}" if c.codecs else ""
        if c.stored is not None:  # an earlier field holds the compressed byte count
            comp = [f"_clen = {res(c.stored)}",
                    "if _clen < 0 or pos + _clen > end:",
                    f"    raise TruncatedError('compressed frame truncated', offset=pos, "
                    f"path={f.name!r}, expected=_clen, found=end - pos)",
                    f"_plain = _decompress({alg}, mv[pos:pos + _clen], {cap}, "
                    f"expected_size={expected}, offset=pos, path={f.name!r}{codecs})"]
        elif lt is None:  # self-terminating: the codec finds the stream's end
            comp = [f"_plain, _clen = _decompress_prefix({alg}, mv[pos:end], {cap}, "
                    f"expected_size={expected}, offset=pos, path={f.name!r}{codecs})"]
        else:
            if isinstance(lt, ir.VarintT):  # any integer kind
                comp = self.varint_decode(lt, "_clen", f.name + ".compressed_len")
            else:
                st = self.const("S", f"struct.Struct({('<' if lt.endian == 'le' else '>') + lt.code!r})")
                comp = [f"if pos + {lt.size} > end:",
                        f"    raise TruncatedError('compressed length truncated', offset=pos, "
                        f"path={f.name + '.compressed_len'!r}, expected={lt.size}, "
                        "found=end - pos)",
                        f"_clen = {st}.unpack_from(mv, pos)[0]",
                        f"pos += {lt.size}"]
            comp += ["if _clen < 0:",
                     f"    raise ConstraintError('negative compressed length', offset=pos, "
                     f"path={f.name!r}, expected='>= 0', found=_clen)"] \
                if lt.signed else []
            comp += ["if pos + _clen > end:",
                    f"    raise TruncatedError('compressed frame truncated', offset=pos, "
                    f"path={f.name!r}, expected=_clen, found=end - pos)",
                    f"_plain = _decompress({alg}, mv[pos:pos + _clen], {cap}, "
                    f"expected_size={expected}, offset=pos, path={f.name!r}{codecs})"]
        comp += ["_fpos = pos",
                "pos += _clen",
                "_save = (mv, pos, end)",
                "mv = memoryview(_plain)",
                "pos, end = 0, len(_plain)",
                "try:"]
        comp += ["    " + x for x in plain_code]
        comp += ["    if pos != end:",
                 f"        raise ConstraintError('decompressed section has trailing bytes', "
                 f"offset=pos, path={f.name!r}, expected=end, found=pos)",
                 "except DecodeError as _exc:",
                 "    _exc.message += f' (at +{_exc.offset} in the section decompressed from "
                 "offset {_fpos})'",
                 "    _exc.offset = _fpos",
                 "    raise",
                 "mv, pos, end = _save"]
        if want_span:
            comp.append(f"_plain_{f.name} = _plain")
        if c.when is None:
            return comp
        out = [f"if {c.when.render(res)}:"]
        out += ["    " + x for x in comp]
        out.append("else:")
        if want_span:
            out.append(f"    _ps_{f.name} = pos")
        if c.stored is not None:  # stored as it is: its stored size bounds it
            inline_code = [f"_csec_{f.name} = end",
                           f"end = pos + {res(c.stored)}",
                           "if end > _csec_" + f.name + ":",
                           f"    raise TruncatedError('stored section truncated', offset=pos, "
                           f"path={f.name!r}, expected=end - pos, found=_csec_{f.name} - pos)",
                           *inline_code,
                           "if pos != end:",
                           f"    raise ConstraintError('stored section size mismatch', "
                           f"offset=pos, path={f.name!r}, expected=end, found=pos)",
                           f"end = _csec_{f.name}"]
        out += ["    " + x for x in inline_code]
        if want_span:
            out.append(f"    _plain_{f.name} = mv[_ps_{f.name}:pos]")
        return out

    def decode_value(self, rec: ir.Record, f: ir.Field, res, prefixed: bool) -> list[str]:
        """Decode one (possibly repeated) value into ``f_<name>``, advancing ``pos``."""
        name = f.name
        t = f.type
        if f.framing is not None:
            return emit_framing.decode_lines(self, f)
        if absent.sentinel(f) is not None:
            return absent.decode_lines(self, rec, f, res)
        if f.repeat is not None:
            return self.decode_repeat(rec, f, res, prefixed)
        return self.decode_one(rec, f, t, f"f_{name}", name, res, prefixed)

    def decode_one(self, rec: ir.Record, f: ir.Field, t: ir.Type, target: str, label: str,
                   res, prefixed: bool) -> list[str]:
        sc = self.scalar_code(t)
        if sc is not None:
            code, size, endian = sc
            st = self.const("S", f"struct.Struct({('<' if endian == 'le' else '>') + code!r})")
            item = Item(f, "value", code, size, target)
            out = [f"if pos + {size} > end:",
                   f"    raise TruncatedError('field truncated', offset=pos, path={label!r}, "
                   f"expected={size}, found=end - pos)",
                   f"{target} = {st}.unpack_from(mv, pos)[0]",
                   "_at = pos",
                   f"pos += {size}"]
            out += self.post_scalar(rec, f, item, "_at")
            return out
        if isinstance(t, ir.BytesT):
            out = []
            if t.terminator is not None:
                out += [f"_n = _find_term(mv, {t.terminator!r}, pos, end, {label!r}) - pos"]
                if t.text:
                    out += self.text_lines(target, "_n", t.text, label)
                else:
                    out.append(f"{target} = bytes(mv[pos:pos + _n])")
                out.append(f"pos += _n + {len(t.terminator)}")
                return out
            if isinstance(t.prefix, ir.VarintT):
                out += self.varint_decode(t.prefix, "_n", label + ".length")
                n = "_n"
                out += self.negative_length(t.prefix, label)
            elif t.prefix is not None:
                if prefixed:
                    n = f"n_{f.name}"
                    out += self.negative_length(t.prefix, label, n)
                else:
                    p = t.prefix
                    st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
                    out += [f"if pos + {p.size} > end:",
                            f"    raise TruncatedError('length prefix truncated', offset=pos, "
                            f"path={label + '.length'!r}, expected={p.size}, found=end - pos)",
                            f"_n = {st}.unpack_from(mv, pos)[0]",
                            f"pos += {p.size}"]
                    n = "_n"
                    out += self.negative_length(p, label)
            elif t.eos:
                n = "(end - pos)"
            else:
                out.append(f"_n = {t.size.render(res)}")
                n = "_n"
                if t.size.constant() is None:
                    out += ["if _n < 0:",
                            f"    raise ConstraintError('negative size', offset=pos, "
                            f"path={label!r}, expected='>= 0', found=_n)"]
            out += [f"if pos + {n} > end:",
                    f"    raise TruncatedError('{t.name} truncated', offset=pos, path={label!r}, "
                    f"expected={n}, found=end - pos)"]
            if t.text:
                out += self.text_lines(target, n, t.text, label)
            else:
                out.append(f"{target} = bytes(mv[pos:pos + {n}])")
            if f.reserved and f.repeat is None:
                out += efe.reserved_check(target, label)
            out.append(f"pos += {n}")
            if f.const is not None and f.repeat is None:
                out += [f"if {target} != {f.const!r}:",
                        f"    raise ConstraintError('bad magic', offset=pos - {n}, path={label!r}, "
                        f"expected={f.const!r}, found={target})"]
            return out
        if isinstance(t, ir.VarintT):
            out = ["_at = pos"] + self.varint_decode(t, target, label)
            out += self.post_scalar(rec, f, Item(f, "value", "varint", 1, target), "_at")
            return out
        if isinstance(t, ir.PaddingT) and t.arbitrary:
            return [f"_n = (-(pos - start)) % {t.align}",
                    "if pos + _n > end:",
                    f"    raise TruncatedError('padding truncated', offset=pos, path={label!r}, "
                    "expected=_n, found=end - pos)",
                    "pos += _n"]
        if isinstance(t, ir.PaddingT):
            return [f"_n = (-(pos - start)) % {t.align}",
                    "if pos + _n > end:",
                    f"    raise TruncatedError('padding truncated', offset=pos, path={label!r}, "
                    "expected=_n, found=end - pos)",
                    "if any(mv[pos:pos + _n]):",
                    f"    raise ConstraintError('padding must be zero', offset=pos, "
                    f"path={label!r})",
                    "pos += _n"]
        if isinstance(t, ir.RefT) and t.kind == "record":
            callee = self.family.records[t.target]
            args = self.call_args(callee, t.args, rec, res)
            return self.call_or_inline_decode(callee, args, target, label,
                                              byteorder.callee_suffix(callee, t.order))
        if isinstance(t, ir.SwitchT):
            out = [f"_tag = {t.on.render(res)}"]
            first = True
            for key, _lbl, target_rec in t.cases:
                kw = "if" if first else "elif"
                first = False
                out.append(f"{kw} _tag == {key!r}:")
                if target_rec is None:
                    out.append(f"    {target} = None")
                else:
                    callee = self.family.records[target_rec]
                    args = self.call_args(callee, t.args, rec, res)
                    out += ["    " + x for x in
                            self.call_or_inline_decode(callee, args, target, label,
                                              byteorder.callee_suffix(callee, t.order))]
            out.append("else:" if not first else "if True:")
            if t.default == "error":
                out.append(f"    raise ConstraintError('no case for tag', offset=pos, "
                           f"path={label!r}, expected={[k for k, _, _ in t.cases]!r}, "
                           "found=_tag)")
            elif t.default == "bytes":
                out += [f"    {target} = bytes(mv[pos:end])", "    pos = end"]
            else:
                callee = self.family.records[t.default]
                args = self.call_args(callee, t.args, rec, res)
                out += ["    " + x for x in
                        self.call_or_inline_decode(callee, args, target, label,
                                              byteorder.callee_suffix(callee, t.order))]
            return out
        raise AssertionError(f"no decoder for {t!r}")

    @staticmethod
    def negative_length(prefix: ir.VarintT | ir.IntT, label: str, n: str = "_n") -> list[str]:
        """A signed length prefix that decodes negative is a rule broken where the data
        starts (as the Construct path reports it), never a backwards read."""
        if not prefix.signed:
            return []
        return [f"if {n} < 0:",
                f"    raise ConstraintError('negative size', offset=pos, path={label!r}, "
                f"expected='>= 0', found={n})"]

    @staticmethod
    def varint_decode(t: ir.VarintT, target: str, label: str) -> list[str]:
        """Decode one varint into ``target``; short uleb128 values skip the call."""
        if not t.legacy:  # a registered integer kind, bound at import
            return [f"{target}, pos = {intkind_binding(t)}.decode(mv, pos, end, {label!r})"]
        if t.kind == "uleb128":
            # one- and two-byte values (below 16384) decode inline, the rest in one call
            return ["if pos < end and mv[pos] < 128:",
                    f"    {target} = mv[pos]",
                    "    pos += 1",
                    "elif pos + 1 < end and mv[pos + 1] < 128:",
                    f"    {target} = mv[pos] & 127 | mv[pos + 1] << 7",
                    "    pos += 2",
                    "else:",
                    f"    {target}, pos = _uleb128(mv, pos, end, {label!r})"]
        return [f"{target}, pos = _{t.kind}(mv, pos, end, {label!r})"]

    @staticmethod
    def varint_encode(t: ir.VarintT, val: str) -> str:
        """One varint's bytes. A uleb128 value that is an exact int (not a bool, which
        the function refuses) below 16384 is written without a call: one byte from a
        prebuilt table, two built in place; anything else goes to the function."""
        if not t.legacy:
            return f"{intkind_binding(t)}.encode({val})"
        if t.kind == "uleb128":
            return (f"(_uleb128_encode(_w) if (_w := {val}).__class__ is not int "
                    f"or not -1 < _w < 16384 else _uleb128_one[_w] if _w < 128 "
                    f"else bytes((_w & 127 | 128, _w >> 7)))")
        return f"_{t.kind}_encode({val})"

    def decode_repeat(self, rec: ir.Record, f: ir.Field, res, prefixed: bool) -> list[str]:
        rp = f.repeat
        name = f.name
        out: list[str] = []
        if isinstance(rp.prefix, ir.VarintT):
            out += self.varint_decode(rp.prefix, "_c", name + ".count")
            count = "_c"
        elif rp.prefix is not None:
            if prefixed:
                count = f"n_{name}"
            else:
                p = rp.prefix
                st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
                out += [f"if pos + {p.size} > end:",
                        f"    raise TruncatedError('count truncated', offset=pos, "
                        f"path={name + '.count'!r}, expected={p.size}, found=end - pos)",
                        f"_c = {st}.unpack_from(mv, pos)[0]",
                        f"pos += {p.size}"]
                count = "_c"
        elif rp.count is not None:
            out.append(f"_c = {rp.count.render(res)}")
            count = "_c"
        else:
            count = None
        sc = self.scalar_code(f.type)
        elem_min = self.type_min(f.type)
        if count is not None:
            least = max(elem_min, 1)
            # one line (the inlining budget counts lines)
            out += [f"if {count} < 0 or {count} * {least} > end - pos:",
                    f"    raise (ConstraintError('negative count ' + str({count}), offset=pos, "
                    f"path={name!r}, expected='>= 0', found={count}) if {count} < 0 else "
                    f"TruncatedError('count ' + str({count}) + ' needs at least ' + "
                    f"str({count} * {least}) + ' bytes', offset=pos, path={name!r}, "
                    f"expected={count} * {least}, found=end - pos))"]
        if f.view == "packed":
            # one slice and one small object, whatever the count (runtime/packed.py)
            out += [f"f_{name} = PackedArray(bytes(mv[pos:pos + {count} * {sc[1]}]), "
                    f"{self.packed_kind(f)})",
                    f"pos += {count} * {sc[1]}"]
            return out
        if sc is not None and count is not None and not self.needs_post(f):
            code, size, endian = sc
            order = "<" if endian == "le" else ">"
            if f.view == "numpy":
                dt = self.const("DT", f"numpy.dtype({order + self.np_code(code)!r})")
                out += [f"f_{name} = numpy.frombuffer(mv, {dt}, {count}, pos)",
                        f"pos += {count} * {size}"]
            elif code.endswith("s"):
                out += [f"f_{name} = [bytes(mv[pos + _i * {size}:pos + (_i + 1) * {size}]) "
                        f"for _i in range({count})]",
                        f"pos += {count} * {size}"]
            else:
                # one struct.Struct per element count, cached (bounded) per field
                rc = self.const("RC", f"{{}}  # {self.lay_name}.{name} element-count structs")
                out += [f"_st = {rc}.get({count})",
                        "if _st is None:",
                        f"    _st = struct.Struct({order!r} + str({count}) + {code!r})",
                        f"    if len({rc}) < 64:",
                        f"        {rc}[{count}] = _st",
                        f"f_{name} = list(_st.unpack_from(mv, pos))",
                        f"pos += {count} * {size}"]
            return out
        base = self.base_int(f.type)
        if sc is not None and count is not None and base is not None and base.code is None \
                and not (isinstance(f.type, ir.RefT) and f.type.kind in ("enum", "flags")) \
                and f.valid is None:
            # wide integers (i128 fixed point, u24), bounds checked above
            size = base.size
            order = "little" if base.endian == "le" else "big"
            if size == 16:
                # struct has no 128-bit code: one cached unpack of (low, high) u64 pairs for
                # the whole array, combined in one pass (measured faster than a slice and
                # an int.from_bytes per element)
                lo, hi = "Q", "q" if base.signed else "Q"
                pair = lo + hi if base.endian == "le" else hi + lo
                names = "_lo, _hi" if base.endian == "le" else "_hi, _lo"
                rc = self.const("RC", f"{{}}  # {self.lay_name}.{name} element-count structs")
                out += [f"_st = {rc}.get({count})",
                        "if _st is None:",
                        f"    _st = struct.Struct({'<' if base.endian == 'le' else '>'!r} + "
                        f"{pair!r} * {count})",
                        f"    if len({rc}) < 64:",
                        f"        {rc}[{count}] = _st",
                        "_it = iter(_st.unpack_from(mv, pos))",
                        f"f_{name} = [_hi << 64 | _lo for {names} in zip(_it, _it)]",
                        f"pos += {count} * {size}"]
                return out
            out += [f"f_{name} = [int.from_bytes(mv[_p:_p + {size}], {order!r}, "
                    f"signed={base.signed}) for _p in range(pos, pos + {count} * {size}, {size})]",
                    f"pos += {count} * {size}"]
            return out
        if f.view == "numpy":
            rec_name = f.type.target
            size = self.family.records[rec_name].layouts[0].fixed_size
            out += [f"f_{name} = numpy.frombuffer(mv, {camel(rec_name)}_DTYPE, {count}, pos)",
                    f"pos += {count} * {size}"]
            return out
        if isinstance(f.type, ir.RefT) and f.type.kind == "record" and \
                self.simple(self.family.records[f.type.target]):
            elem = self.inline_simple(self.family.records[f.type.target], "_x")
        else:
            elem = self.decode_one(rec, f, self.chained_type(f), "_x", "", res, False)
            if f.chain is not None:
                elem = ["_p0 = pos"] + elem + [f"f__chain = {self.chain_read(f, 'mv', '_p0', 'pos')}"]
        if rp.stop_on_error:
            # the first item that fails ends the list; why and where is kept on the list
            loop = ["_i = 0", "while True:", "    if pos >= end:", "        break",
                    "    _ip = pos", "    try:"]
            loop += ["        " + x for x in elem]
            loop += ["    except DecodeError as _exc:",
                     f"        f_{name}.stop = _stop_reason(_exc.prefixed('[' + str(_i) + ']')"
                     f".prefixed({name!r}), _ip)",
                     "        pos = end",
                     "        break",
                     "    if pos <= _ip:",
                     f"        f_{name}.stop = _stop_reason(ConstraintError('repeated item consumes "
                     f"no bytes', offset=_ip, path={name!r}), _ip)",
                     "        pos = end",
                     "        break",
                     f"    f_{name}.append(_x)",
                     "    _i += 1"]
            return out + [f"f_{name} = _LogList()"] + loop
        loop = ["try:"]
        if count is not None:
            loop.append(f"    for _i in range({count}):")
        elif rp.until is not None or rp.until_item is not None:
            loop += ["    _i = 0", "    while True:"]
        else:
            loop += ["    _i = 0", "    while True:", "        if pos >= end:", "            break",
                     "        _ip = pos"]
        loop += ["        " + x for x in elem]
        if rp.until is not None:
            loop += [f"        if _x == {rp.until!r}:", "            break"]
        if count is None and rp.until is None and rp.until_item is None:
            # a zero-size item would repeat forever
            loop += ["        if pos <= _ip:",
                     "            raise ConstraintError('repeated item consumes no bytes', "
                     "offset=pos, path='')"]
        loop.append(f"        f_{name}.append(_x)")
        if count is None:
            loop.append("        _i += 1")
        if rp.until_item is not None:
            cond = rp.until_item.render(lambda n: "_x" if n == "_item" else res(n))
            loop += [f"        if {cond}:", "            break"]
        loop += ["except DecodeError as _exc:",
                 f"    raise _exc.prefixed('[' + str(_i) + ']').prefixed({name!r}) from None"]
        out.append(f"f_{name} = []")
        out += loop
        return out

    def simple(self, rec: ir.Record) -> bool:
        """Records made only of fixed scalars and length-prefixed bytes are inlined."""
        if rec.params or rec.version_from or len(rec.layouts) != 1:
            return False
        for f in rec.fields:
            if f.checksum is not None or f.derived_from or f.value is not None:
                return False
            if self.runnable(f):
                continue
            if isinstance(f.type, ir.BytesT) and isinstance(f.type.prefix, ir.IntT) \
                    and self.plain(f) and f.const is None:
                continue
            return False
        return True

    def inline_simple(self, rec: ir.Record, target: str) -> list[str]:
        """Decode a simple record inline (no call) into ``target``; locals are prefixed."""
        out: list[str] = []
        run: list[Item] = []
        px = f"_{rec.name}_"

        def flush() -> None:
            if run:
                out.extend(self.decode_run(rec, run, Spans()))
                run.clear()

        for f in rec.fields:
            role = "value" if self.runnable(f) else "prefix"
            if not self.compatible(run, f, role):
                flush()
            self.add_run_item(run, f, role)
            run[-1].local = px + run[-1].local
            if role == "prefix":
                flush()
                t = f.type
                n = f"{px}n_{f.name}"
                out += [f"if pos + {n} > end:",
                        f"    raise TruncatedError('{t.name} truncated', offset=pos, "
                        f"path={f.name!r}, expected={n}, found=end - pos)"]
                if t.text:
                    out += self.text_lines(f"{px}f_{f.name}", n, t.text, f.name)
                else:
                    out.append(f"{px}f_{f.name} = bytes(mv[pos:pos + {n}])")
                out.append(f"pos += {n}")
        flush()
        vals = [f"{px}f_{n}" for n in self.model_names(rec)]
        out += self.construct(rec, vals, f"{px}_obj")
        out.append(f"{target} = {px}_obj")
        return out

    def inline_simple_encode(self, rec: ir.Record, val: str, res) -> list[str]:
        """Encode a simple record inline (no call per item), the mirror of
        :meth:`inline_simple`; byte-string locals are prefixed with the record name."""
        out: list[str] = efe.assert_checks(rec, rec.layouts[0], lambda n: f"{val}.{n}")
        run: list[Item] = []
        px = f"_{rec.name}_"

        def flush() -> None:
            if run:
                st = self.run_struct(run)
                out.extend(re.sub(r"\bv\.", f"{val}.", x) for x in efe.run_checks(self, run))
                vals = ", ".join(self.scalar_value(it.field, it, res)
                                 .replace(f"v.{it.field.name}", f"{val}.{it.field.name}")
                                 .replace(f"_b_{it.field.name}", f"{px}b_{it.field.name}")
                                 for it in run)
                out.append(f"out += {st}.pack({vals})")
                run.clear()

        for f in rec.fields:
            role = "value" if self.runnable(f) else "prefix"
            if not self.compatible(run, f, role):
                flush()
            if role == "prefix":
                enc = _encode_call(f.type.text) if f.type.text else ""
                out.append(f"{px}b_{f.name} = {val}.{f.name}{enc}")
            self.add_run_item(run, f, role)
            if role == "prefix":
                flush()
                out.append(f"out += {px}b_{f.name}")
        flush()
        return out

    def run_struct(self, run: list[Item]) -> str:
        """The precompiled Struct constant of one fixed run (one byte order)."""
        endian = "<"
        for it in run:
            if not it.code.endswith("s"):
                endian = "<" if self.item_endian(it) == "le" else ">"
                break
        return self.const("S", f"struct.Struct({endian + ''.join(it.code for it in run)!r})")

    @staticmethod
    def text_lines(target: str, n: str, encoding: str, label: str) -> list[str]:
        """Inline text decoding (no helper call on the happy path)."""
        return ["try:",
                f"    {target} = str(mv[pos:pos + {n}], {encoding!r})",
                "except UnicodeDecodeError as _u:",
                f"    raise _text_error(_u, pos, {encoding!r}, {label!r}) from None"]

    def needs_post(self, f: ir.Field) -> bool:
        if f.valid is not None:
            return True  # every item is range-checked, as on the Construct path
        t = f.type
        if isinstance(t, ir.RefT) and t.kind in ("enum", "flags"):
            return True
        it = self.base_int(t)
        return bool(it and it.code is None)

    def packed_kind(self, f: ir.Field) -> str:
        """The module constant naming the element kind of a ``view: packed`` field."""
        it = self.base_int(f.type)
        if it is not None:
            order, code, size, signed = it.endian, it.code or "", it.size, it.signed
        else:
            order, code, size, signed = f.type.endian, f.type.code, f.type.size, True
        order = "<" if order == "le" else ">"
        return self.const("PK", f"_packed_kind({order!r}, {code!r}, {size}, {signed})")

    @staticmethod
    def np_code(code: str) -> str:
        return {"B": "u1", "b": "i1", "H": "u2", "h": "i2", "I": "u4", "i": "i4",
                "Q": "u8", "q": "i8", "f": "f4", "d": "f8"}[code]

    def checksum_check(self, f: ir.Field, at: str) -> list[str]:
        index = next(i for i, x in enumerate(self.lay.fields) if x is f)
        expr = self.checksum_expr(self.lay, index, "mv", "start", self.dec_res)
        return [f"_ck = {expr}",
                f"if f_{f.name} != _ck:",
                f"    raise ChecksumError('{f.checksum.algorithm} mismatch', offset={at}, "
                f"path={f.name!r}, expected=_ck, found=f_{f.name})"]

    def checksum_expr(self, lay: ir.Layout, index: int, buf: str, start: str, res) -> str:
        """Python expression computing the checksum of field ``index`` over ``buf``."""
        f = lay.fields[index]
        if f.checksum.ranges:  # record-relative byte ranges, in the order listed
            parts = [f"{buf}[{start} + {a}:{start} + {b}]" for a, b in f.checksum.ranges]
            data = parts[0] if len(parts) == 1 else f"b''.join(({', '.join(parts)},))"
            return checksum_call(f.checksum, data, res)
        if f.checksum.files:  # absolute ranges of the buffer decoded / the bytes encoded
            fill = self.const("FB", repr(cover.filler_bytes(
                f.checksum, self.ck_width(f.type))))
            parts = [f"_cover.file_range(mv, {a.render(res)}, {b.render(res)}, _s_{f.name}, "
                     f"{f.name!r}, {fill})" if buf == "mv" else
                     f"_cover.file_range_out(out, {a.render(res)}, {b.render(res)}, "
                     f"{f.name!r})" for a, b in f.checksum.files]
            data = parts[0] if len(parts) == 1 else f"b''.join(({', '.join(parts)},))"
            return checksum_call(f.checksum, data, res)
        covered = self.covered(lay, index)
        order = [x.name for x in lay.fields]
        comp = {x.name for x in lay.fields if x.compressed is not None}
        own = f.name if cover.anchor(lay.fields, index) is not None else None
        pieces: list[str] = []
        group: list[str] = []

        def close() -> None:
            if group:
                pieces.append(f"{buf}[_s_{group[0]}:_e_{group[-1]}]")
                group.clear()

        prev = None
        for n in covered:
            if n == own:  # the checksum's own bytes: the filler (the encoder wrote it)
                close()
                if buf == "mv":
                    fill = self.const("FB", repr(cover.filler_bytes(
                        f.checksum, self.ck_width(f.type))))
                    pieces.append(f"({fill} if f_{n} is not None else b'')" if f.cond
                                  else fill)
                else:
                    pieces.append(f"{buf}[_atck_{n}:_e_{n}]")
            elif n in comp:
                close()
                pieces.append(f"_plain_{n}")
            else:
                if group and order.index(n) != order.index(prev) + 1:
                    close()
                group.append(n)
            prev = n
        close()
        data = pieces[0] if len(pieces) == 1 else f"b''.join(({', '.join(pieces)},))"
        m = re.fullmatch(r"memoryview\(out\)\[(_s_\w+):(_e_\w+)\]", data)
        if m:  # the whole buffer so far (a top-level record): no memoryview objects
            s_, e_ = m.groups()
            data = f"(out if {s_} == 0 and {e_} == len(out) else {data})"
        return checksum_call(f.checksum, data, res)

    # -- encoding ------------------------------------------------------------------
    def encoder(self, rec: ir.Record, lay: ir.Layout) -> list[str]:
        params = "".join(f", p_{p}" for p in rec.params)
        self.lay = lay
        self.cur_rec = rec
        by_name = {f.name: f for f in lay.fields}
        derived_targets: dict[str, ir.Field] = {}
        for f in lay.fields:
            if f.derived_from:
                derived_targets.setdefault(f.derived_from[1], f)

        def res(name: str) -> str:
            if name in rec.params:
                return f"p_{name}"
            if name == "_offset":
                return "(len(out) - start)"
            if name == "_remaining":  # only known while decoding
                return "_no_remaining()"
            f = by_name.get(name)
            if f is not None and f.checksum is not None:
                return f"f_{name}"  # computed by encode_checksum (never in the model)
            if f is None and any(x.name == name for x in rec.virtuals):
                return f"v.{name}"  # a value with no bytes: the model holds it
            if f is None and name in rec.bit_parts:
                return f"_bp_{name}"  # a bit range, checked up front (bitfields.checks)
            if f is None:
                return "None"  # field absent in this version
            if f.derived_from:
                kind, target = f.derived_from
                if kind == "count":
                    return f"len(v.{target})"
                if kind == "stored":
                    return f"_stored_{target}"
                if f.derived_offset:
                    return f"(_size_{target} + {f.derived_offset})"
                return f"_size_{target}"
            if f.value is not None:
                return f.value.render(res)
            if f.const is not None:
                return repr(f.const)
            return f"v.{name}"

        self.enc_res = res
        spans = self.spans_needed(lay)
        self.deferred = self.deferred_checksums(lay)
        # size-derived fields whose target is encoded later get patched afterwards
        lines = [f"def _e_{rec.name}{lay.suffix}(out, v{params}):", "    start = len(out)"]
        body: list[str] = bitfields.checks(self, lay.fields, res)  # the value's bit ranges
        body += efe.assert_checks(rec, lay, res)  # before anything is written
        run: list[Item] = []

        def flush() -> None:
            if run:
                body.extend(self.encode_run(rec, run, spans, res))
                run.clear()

        # late checksums (covering bytes at or after their place): patched once the last
        # byte they cover is written
        patches: dict[int, list[ir.Field]] = {}
        for i, f in enumerate(lay.fields):
            if f.checksum is not None:
                at = cover.anchor(lay.fields, i, encode=True)
                if at is not None:
                    patches.setdefault(at, []).append(f)

        def step(f: ir.Field) -> None:
            if f.checksum is not None:
                flush()
                body.extend(self.encode_checksum(rec, f, spans))
                return
            role = self.run_role(f)
            if role is not None and not self.compatible(run, f, role):
                flush()
            if role == "value":
                self.add_run_item(run, f, "value")
                return
            if role == "prefix":
                body.extend(self.encode_text_prep(f))
                self.add_run_item(run, f, role)
                flush()
                body.extend(self.encode_field(rec, f, res, spans, prefixed=True))
                return
            if role == "count":
                self.add_run_item(run, f, role)
                flush()
                body.extend(self.encode_field(rec, f, res, spans, prefixed=True))
                return
            flush()
            body.extend(self.encode_field(rec, f, res, spans))

        for i, f in enumerate(lay.fields):
            step(f)
            if i in patches:
                flush()
                for ck in patches[i]:
                    body.extend(self.encode_checksum(rec, ck, spans, patch=True))
        flush()
        body += efe.assert_checks(rec, lay, res, late=True)  # sizes measured by now
        lines += ["    " + b for b in body] or ["    pass"]
        lines = self.drop_unused_start(lines) if body else lines
        lines = self.trailing_checksum(lines)
        if not self._inline_stack and not self._no_twin and len(rec.layouts) == 1 \
                and not rec.version_from:
            lines += self.encoder_many(rec, lines)
        return lines

    trailing_checksum = staticmethod(efe.trailing_checksum)

    def encoder_many(self, rec: ir.Record, lines: list[str]) -> list[str]:
        """``_em_<record>(values, *params)``: the encoder's body once per value in one
        loop (no call, no argument tuple per record). It raises whatever the body
        raises; ``encode_many_<record>`` then re-runs the per-record loop, which names
        the failing item exactly as before."""
        if len(lines) > self.OPTIMISTIC_MAX_LINES:
            return []
        fn = ast.parse("\n".join(lines)).body[0]
        nodes = list(walk(fn))
        if any(isinstance(n, (ast.Return, ast.Yield, ast.Lambda, ast.Global, ast.Nonlocal))
               or (isinstance(n, ast.FunctionDef) and n is not fn)
               or (isinstance(n, ast.Name) and n.id == "values") for n in nodes):
            return []
        formats = {m.group(1): m.group(2) for c in self.consts
                   if (m := re.fullmatch(r"(_S\d+) = struct\.Struct\('([^']*)'\)", c))}
        static_padding(fn.body, formats)
        drop_len_marks(fn)
        fuse_packs(fn.body, formats, lambda fmt: self.const("S", f"struct.Struct({fmt!r})"))
        if "_ln" not in {n.id for n in walk(fn) if isinstance(n, ast.Name)}:
            small_length_packs(fn, formats, lambda fmt: self.const(
                "L", f"tuple(struct.pack({fmt!r}, _i) for _i in range({SMALL_LENGTHS}))"))
        nodes = list(walk(fn))
        params = [a.arg for a in fn.args.args[2:]]
        hoisted: set[str] = set()
        taken = {n.id for n in nodes if isinstance(n, ast.Name)}
        for n in nodes:  # struct methods bound once per log
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "pack" and isinstance(n.func.value, ast.Name) \
                    and re.fullmatch(r"_S\d+", n.func.value.id) \
                    and f"{n.func.value.id}_pack" not in taken:
                hoisted.add(n.func.value.id)
                n.func = ast.Name(f"{n.func.value.id}_pack", ast.Load())
        loop_checksums(fn)
        if not taken & {"_all", "_a", "_chunks"} and gather_parts(fn.body, direct="_a"):
            # each record is joined bytes now, or (no checksum over it) its pieces are
            # listed as they are: records are listed and joined a chunk at a time, the
            # chunks once at the end. Fewer copies than growing a bytearray; and unlike
            # one list of every record, the records' memory is reused chunk after chunk
            # rather than taken fresh from the system for the whole log (measured:
            # ~1,400 page faults per 4 MB encoded)
            for i, st in enumerate(fn.body):
                if _is_out_append(st):
                    fn.body[i] = ast.Expr(ast.Call(ast.Name("_a", ast.Load()), [st.value], []))
                    ast.fix_missing_locations(fn.body[i])
            fn.body[:0] = ast.parse(f"if len(_all) >= {self.ENCODE_CHUNK}:\n"
                                    "    _chunks.append(b''.join(_all))\n"
                                    "    _all.clear()").body
            head = ["    _all = []", "    _a = _all.append", "    _chunks = []"]
            tail = ["    _chunks.append(b''.join(_all))", "    return b''.join(_chunks)"]
        else:
            head, tail = ["    out = bytearray()"], ["    return bytes(out)"]
        body = ast.unparse(ast.Module(body=fn.body, type_ignores=[])).splitlines()
        return ["", f"def _em_{rec.name}(values{''.join(', ' + p for p in params)}):"] \
            + head + [f"    {h}_pack = {h}.pack" for h in sorted(hoisted)] + [
                "    for v in values:"] + ["        " + x for x in body] + tail

    def deferred_checksums(self, lay: ir.Layout) -> dict[str, list[ir.Field]]:
        """Checksums covering a size-derived field whose sized field comes after them.

        Such a checksum cannot be computed in place (the size is patched only once the
        sized field is encoded): it is written as a placeholder and patched right after
        the size patch. Maps the sized field's name to those checksum fields.
        """
        out: dict[str, list[ir.Field]] = {}
        names = [x.name for x in lay.fields]
        for i, f in enumerate(lay.fields):
            if f.checksum is None or cover.anchor(lay.fields, i, encode=True) is not None:
                continue
            later = set()
            for n in self.covered(lay, i):
                d = lay.fields[names.index(n)].derived_from
                if d and d[0] in ("size", "stored") and d[1] in names \
                        and names.index(d[1]) > i:
                    later.add(names.index(d[1]))
            if later:
                out.setdefault(names[max(later)], []).append(f)
        return out

    def encode_text_prep(self, f: ir.Field) -> list[str]:
        if f.type.text:
            return [f"_b_{f.name} = v.{f.name}{_encode_call(f.type.text)}"]
        return [f"_b_{f.name} = v.{f.name}"]

    def scalar_value(self, f: ir.Field, it: Item, res) -> str:
        """Expression for the value packed into a run slot."""
        if it.role == "prefix":
            return f"len(_b_{f.name})"
        if it.role == "count":
            return f"len(v.{f.name})"
        base = self.base_int(f.type)
        if f.const is not None:
            val = repr(f.const)
        elif f.reserved:
            val = "0" if base is not None else repr(bytes(it.size))
        elif f.derived_from:
            kind, target = f.derived_from
            val = f"len(v.{target})" if kind == "count" else "0"
        elif f.value is not None:
            val = f.value.render(res)
        else:
            val = f"v.{f.name}"
            if isinstance(f.type, ir.RefT) and f.type.kind == "flags":
                val = f"v.{f.name}.to_int()"
            elif isinstance(f.type, ir.RefT) and f.type.kind == "enum" \
                    and not self.family.enums[f.type.target].open:  # a non-member: KeyError
                val = f"_{enum_class(f.type.target).upper()}_BY_VALUE[{val}]"
        if base is not None and it.code.endswith("s"):
            order = "little" if base.endian == "le" else "big"
            val = f"({val}).to_bytes({base.size}, {order!r}, signed={base.signed})"
        return val

    def encode_run(self, rec: ir.Record, run: list[Item], spans: set[str], res) -> list[str]:
        endian = "<"
        for it in run:
            if not it.code.endswith("s"):
                endian = "<" if self.item_endian(it) == "le" else ">"
                break
        fmt = endian + "".join(it.code for it in run)
        st = self.const("S", f"struct.Struct({fmt!r})")
        out = []
        off = 0
        patches = []
        for it in run:
            f = it.field
            if f.name in spans.s:
                out.append(f"_s_{f.name} = len(out)" + (f" + {off}" if off else ""))
            if f.name in spans.e and it.role == "value":
                out.append(f"_e_{f.name} = len(out) + {off + it.size}")
            if it.role == "value" and f.derived_from and f.derived_from[0] in ("size", "stored"):
                patches.append(f"_at_{f.name} = len(out) + {off}")
            off += it.size
        out += patches + efe.run_checks(self, run)
        vals = ", ".join(self.scalar_value(it.field, it, res) for it in run)
        out.append(f"out += {st}.pack({vals})")
        return out

    def encode_field(self, rec: ir.Record, f: ir.Field, res, spans: set[str],
                     prefixed: bool = False) -> list[str]:
        if f.peek:
            return []  # a lookahead owns no bytes
        if isinstance(f.type, ir.VarintT) and f.derived_from \
                and f.derived_from[0] == "stored":  # inserted once the frame is built
            return ([f"_s_{f.name} = len(out)"] if f.name in spans.s else []) + \
                [f"_at_{f.name} = len(out)"]
        name = f.name
        want_span = name in spans
        out: list[str] = []
        if isinstance(f.type, ir.VarintT) and f.type.fixed is not None \
                and f.derived_from and f.derived_from[0] == "size":
            # a fixed-width kind: a placeholder, patched in place once the size is known
            return ([f"_s_{name} = len(out)"] if name in spans.s else []) + \
                [f"_at_{name} = len(out)", f"out += bytes({f.type.fixed})"] + \
                ([f"_e_{name} = len(out)"] if name in spans.e else [])
        if isinstance(f.type, ir.VarintT) and f.derived_from and f.derived_from[0] == "size":
            # written once its field's size is known (``insert_varint_size``)
            return ([f"_s_{name} = len(out)"] if name in spans.s else []) + \
                [f"_at_{name} = len(out)"]
        if name in spans.s and not prefixed:
            out.append(f"_s_{name} = len(out)")
        val = f"v.{name}"
        if f.convert is not None:
            val = f"_convert_encode({numeric_binding(f.convert)}, v.{name}, {name!r})"
        inner = self.encode_value(rec, f, val, res, prefixed)
        if absent.sentinel(f) is not None:
            inner = absent.encode_lines(self, rec, f, inner, spans)
        if f.chain is not None:
            inner = [f"f__chain = {f.chain.first.render(res)}"] + inner
        size_target = None
        for other in self.lay.fields:
            if other.derived_from == ("size", name):
                size_target = other
        if f.compressed is not None:
            self.cur_spans = spans  # a varint stored size is inserted (and moves spans)
            inner = self.encode_compressed(f, inner, res, want_span, size_target)
        elif size_target is not None:
            inner = ["_ps = len(out)"] + inner + [f"_size_{name} = len(out) - _ps"]
        else:  # a size the encoder cannot derive: what it wrote must agree with it
            inner = efe.size_checked(rec, f, inner, res)
        if size_target is not None and isinstance(size_target.type, ir.VarintT) \
                and size_target.type.fixed is not None:
            k = f" + {size_target.derived_offset}" if size_target.derived_offset else ""
            inner.append(self.ck_packers(size_target.type)[1](
                f"_at_{size_target.name}", f"_size_{name}{k}"))
        elif size_target is not None and isinstance(size_target.type, ir.VarintT):
            inner += self.insert_varint_size(size_target, f, spans)
        elif size_target is not None:
            st = self.patch_struct(size_target)
            k = f" + {size_target.derived_offset}" if size_target.derived_offset else ""
            inner.append(f"{st}.pack_into(out, _at_{size_target.name}, _size_{name}{k})")
        for ck in self.deferred.get(name, ()):
            inner += self.encode_checksum(rec, ck, spans, patch=True)
        own = efe.own_size_names(f, self.lay.fields)
        if own:  # the condition reads a size of the field itself: measured, then checked
            out += efe.own_size_cond(f, inner, f.cond.render(res), own)
        elif f.cond is not None:
            inner = efe.fixed_bytes_check(f) + inner
            if ("_remaining" in f.cond.names or f.cond.names & peek.peeked(rec)) and f.in_model:
                out.append(f"if v.{name} is not None:")  # presence is the value's, on encode
            else:
                out.append(f"if {f.cond.render(res)}:")
            out += ["    " + x for x in inner]
            if f.in_model:
                dflt = (f" and v.{name} != {defaults.code(f, self.family)}"
                        if f.has_default and f.default is not None else "")
                out += [f"elif v.{name} is not None{dflt}:",
                        f"    raise EncodeError('field is present but its condition is false', "
                        f"path={name!r})"]
            if want_span and f.compressed is not None:
                out += ["else:", f"    _plain_{name} = b''"]
        else:
            out += inner
        if name in spans.e:
            out.append(f"_e_{name} = len(out)")
        return out

    def insert_varint_size(self, size_f: ir.Field, target: ir.Field, spans: Spans,
                           value: str | None = None) -> list[str]:
        """A varint size is only known once its field is encoded and its width depends on
        the value: insert it at its place, then move every offset remembered since."""
        k = f" + {size_f.derived_offset}" if size_f.derived_offset else ""
        at = f"_at_{size_f.name}"
        value = value or f"_size_{target.name}{k}"
        out = [f"_k = {self.varint_encode(size_f.type, value)}",
               f"out[{at}:{at}] = _k"]
        names = [x.name for x in self.lay.fields]
        between = self.lay.fields[names.index(size_f.name) + 1:names.index(target.name) + 1]
        if size_f.name in spans.e:
            out.append(f"_e_{size_f.name} = {at} + len(_k)")
        for x in between:
            if x.name in spans.s:
                out.append(f"_s_{x.name} += len(_k)")
            if x.name in spans.e and x is not target:
                out.append(f"_e_{x.name} += len(_k)")
            if x.derived_from and x.derived_from[0] == "size" and x is not target:
                out.append(f"_at_{x.name} += len(_k)")
            if any(x is c for cks in self.deferred.values() for c in cks) or (
                    x.checksum is not None and self.is_late(x, encode=True)):
                # (a late checksum's placeholder, patched once its last field is written)
                out.append(f"_atck_{x.name} += len(_k)")
        return out

    def patch_stored(self, stored: ir.Field, f: ir.Field) -> list[str]:
        """Write the stored (compressed) byte count ``_stored_<f>`` at its place."""
        if isinstance(stored.type, ir.VarintT):
            return self.insert_varint_size(stored, f, self.cur_spans, f"_stored_{f.name}")
        return [f"{self.patch_struct(stored)}.pack_into(out, _at_{stored.name}, "
                f"_stored_{f.name})"]

    def patch_struct(self, f: ir.Field) -> str:
        it = self.base_int(f.type)
        return self.const("S", f"struct.Struct({('<' if it.endian == 'le' else '>') + it.code!r})")

    def encode_compressed(self, f: ir.Field, inner: list[str], res, want_span: bool,
                          size_target: ir.Field | None) -> list[str]:
        c = f.compressed
        lt = c.length
        codecs = f", codecs={self.codecs_const(c)}" if c.codecs else ""
        comp = ["_outer = out", "out = bytearray()"]
        comp += inner
        comp += ["_plain = bytes(out)", "out = _outer",
                 f"_frame = _compress({c.algorithm.render(res)}, _plain, path={f.name!r}{codecs})"]
        if isinstance(lt, ir.VarintT):
            comp.append(f"out += {self.varint_encode(lt, 'len(_frame)')}")
        elif lt is not None:
            st = self.const("S", f"struct.Struct({('<' if lt.endian == 'le' else '>') + lt.code!r})")
            comp.append(f"out += {st}.pack(len(_frame))")
        comp.append("out += _frame")
        stored = next((o for o in self.lay.fields if o.derived_from == ("stored", f.name)), None)
        if stored is not None:  # the compressed byte count, patched over its placeholder
            comp += [f"_stored_{f.name} = len(_frame)", *self.patch_stored(stored, f)]
        if want_span:
            comp.append(f"_plain_{f.name} = _plain")
        if size_target is not None:
            comp.append(f"_size_{f.name} = len(_plain)")
        if c.when is None:
            return comp
        out = [f"if {c.when.render(res)}:"] + ["    " + x for x in comp] + ["else:"]
        plain = ["_ps = len(out)"] + inner
        if want_span:
            plain.append(f"_plain_{f.name} = bytes(out[_ps:])")
        if size_target is not None:
            plain.append(f"_size_{f.name} = len(out) - _ps")
        if stored is not None:  # stored as it is: the stored size is the plain size
            plain += [f"_stored_{f.name} = len(out) - _ps", *self.patch_stored(stored, f)]
        out += ["    " + x for x in plain]
        return out

    def encode_value(self, rec: ir.Record, f: ir.Field, val: str, res,
                     prefixed: bool) -> list[str]:
        if f.framing is not None:
            return emit_framing.encode_lines(self, f, val)
        if f.repeat is not None:
            return self.encode_repeat(rec, f, val, res, prefixed)
        return self.encode_one(rec, f, f.type, val, res, prefixed)

    def encode_one(self, rec: ir.Record, f: ir.Field, t: ir.Type, val: str, res,
                   prefixed: bool) -> list[str]:
        sc = self.scalar_code(t)
        if sc is not None:
            code, size, endian = sc
            st = self.const("S", f"struct.Struct({('<' if endian == 'le' else '>') + code!r})")
            item = Item(f, "value", code, size, "")
            if val == f"v.{f.name}":
                v2 = self.scalar_value(f, item, res)
            else:
                v2 = val
                if isinstance(t, ir.RefT) and t.kind == "flags":
                    v2 = f"{val}.to_int()"
                elif isinstance(t, ir.RefT) and t.kind == "enum" and not self.family.enums[t.target].open:
                    v2 = f"_{enum_class(t.target).upper()}_BY_VALUE[{val}]"  # KeyError: not one
                base = self.base_int(t)
                if base is not None and code.endswith("s"):
                    order = "little" if base.endian == "le" else "big"
                    v2 = f"({v2}).to_bytes({base.size}, {order!r}, signed={base.signed})"
            return [f"out += {st}.pack({v2})"]
        if isinstance(t, ir.BytesT):
            if f.reserved and val == f"v.{f.name}":  # not in the model: zeros
                return efe.reserved_bytes(f, t, res)
            if prefixed:
                return [f"out += _b_{f.name}"]
            b = f"{val}{_encode_call(t.text)}" if t.text else val
            out = [f"_b = {b}"]
            if t.terminator is not None:
                return out + [f"if {t.terminator!r} in _b:",
                              f"    raise EncodeError('value contains the terminator "
                              f"{t.terminator.hex()}', path={f.name!r})",
                              f"out += _b + {t.terminator!r}"]
            if isinstance(t.prefix, ir.VarintT):
                out.append(f"out += {self.varint_encode(t.prefix, 'len(_b)')}")
            elif t.prefix is not None:
                p = t.prefix
                st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
                out.append(f"out += {st}.pack(len(_b))")
            elif t.size is not None and not t.eos and "_remaining" not in t.size.names \
                    and not any(o.derived_from == ("size", f.name) for o in self.lay.fields):
                out += [f"if len(_b) != {t.size.render(res)}:",
                        f"    raise EncodeError('wrong length ' + str(len(_b)), path={f.name!r})"]
            out.append("out += _b")
            return out
        if isinstance(t, ir.VarintT):
            if val == f"v.{f.name}":  # const/value/derived count: computed, as in runs
                if f.const is not None:
                    val = repr(f.const)
                elif f.reserved:
                    val = "0"
                elif f.derived_from and f.derived_from[0] == "count":
                    val = f"len(v.{f.derived_from[1]})"
                elif f.value is not None:
                    val = f.value.render(res)
            if f.valid is not None and f.in_model and f.repeat is None \
                    and f.convert is None and val == f"v.{f.name}":
                # the decoder's range: a value outside it would not read back
                return efe.valid_check(f, val) + [f"out += {self.varint_encode(t, val)}"]
            return [f"out += {self.varint_encode(t, val)}"]
        if isinstance(t, ir.PaddingT):
            return [f"out += bytes((-(len(out) - start)) % {t.align})"]
        if isinstance(t, ir.RefT) and t.kind == "record":
            callee = self.family.records[t.target]
            args = self.call_args(callee, t.args, rec, res)
            return self.call_or_inline_encode(callee, args, val,
                                              byteorder.callee_suffix(callee, t.order))
        if isinstance(t, ir.SwitchT):
            out = [f"_tag = {t.on.render(res)}"]
            first = True
            for key, lbl, target_rec in t.cases:
                out.append(f"{'if' if first else 'elif'} _tag == {key!r}:")
                first = False
                if target_rec is None:
                    out += [f"    if {val} is not None:",
                            f"        raise EncodeError('case {lbl} carries no body', "
                            f"path={f.name!r})"]
                else:
                    callee = self.family.records[target_rec]
                    args = self.call_args(callee, t.args, rec, res)
                    out += ["    " + x for x in efe.case_check(val, camel(target_rec), lbl, f.name)
                            + self.call_or_inline_encode(callee, args, val,
                                              byteorder.callee_suffix(callee, t.order))]
            out.append("else:" if not first else "if True:")
            if t.default == "error":
                out.append(f"    raise EncodeError('no case for tag ' + repr(_tag), "
                           f"path={f.name!r})")
            elif t.default == "bytes":
                out.append(f"    out += {val}")
            else:
                callee = self.family.records[t.default]
                args = self.call_args(callee, t.args, rec, res)
                out += ["    " + x for x in self.call_or_inline_encode(callee, args, val,
                                              byteorder.callee_suffix(callee, t.order))]
            return out
        raise AssertionError(f"no encoder for {t!r}")

    def encode_repeat(self, rec: ir.Record, f: ir.Field, val: str, res,
                      prefixed: bool) -> list[str]:
        rp = f.repeat
        out: list[str] = []
        if isinstance(rp.prefix, ir.VarintT):
            out.append(f"out += {self.varint_encode(rp.prefix, f'len({val})')}")
        elif rp.prefix is not None and not prefixed:
            p = rp.prefix
            st = self.const("S", f"struct.Struct({('<' if p.endian == 'le' else '>') + p.code!r})")
            out.append(f"out += {st}.pack(len({val}))")
        if rp.count is not None:
            out += [f"if len({val}) != {rp.count.render(res)}:",
                    f"    raise EncodeError('expected ' + str({rp.count.render(res)}) + "
                    f"' items, found ' + str(len({val})), path={f.name!r})"]
        if rp.until_item is not None:
            cond = rp.until_item.render(lambda n: "_x" if n == "_item" else res(n))
            out += [f"for _j, _x in enumerate({val}):",
                    f"    if bool({cond}) != (_j == len({val}) - 1):",
                    f"        raise EncodeError('repeat-until condition must hold on the last "
                    f"item and only there', path={f.name!r})"]
        sc = self.scalar_code(f.type)
        if f.view == "packed":
            kind = self.packed_kind(f)
            out += [f"if {val}.__class__ is PackedArray and {val}.kind is {kind}:",
                    f"    out += {val}.raw",  # the bytes as decoded: no conversion
                    "else:",
                    f"    out += {kind}.encode_all({val})"]
            return out
        if sc is not None and not self.needs_post(f) and rp.until is None:
            code, size, endian = sc
            order = "<" if endian == "le" else ">"
            if f.view == "numpy":
                out.append(f"out += numpy.asarray({val}, "
                           f"dtype={order + self.np_code(code)!r}).tobytes()")
            elif code.endswith("s"):
                out.append(f"out += b''.join({val})")
            else:
                out.append(f"out += struct.pack({order!r} + str(len({val})) + {code!r}, *{val})")
            return out
        if f.view == "numpy":
            out.append(f"out += numpy.ascontiguousarray({val}).tobytes()")
            return out
        base = self.base_int(f.type)
        if sc is not None and base is not None and base.code is None and rp.until is None \
                and f.chain is None and f.valid is None and f.const is None \
                and not f.reserved and not (isinstance(f.type, ir.RefT)
                                            and f.type.kind in ("enum", "flags")):
            # wide integers: one join instead of a pack call per element (an out-of-range
            # item raises OverflowError, reported by encode_<record> as before)
            order = "little" if base.endian == "le" else "big"
            out.append(f"out += b''.join([_x.to_bytes({base.size}, {order!r}, "
                       f"signed={base.signed}) for _x in {val}])")
            return out
        if isinstance(f.type, ir.RefT) and f.type.kind == "record" and rp.until is None \
                and f.chain is None and self.simple(self.family.records[f.type.target]):
            elem = self.inline_simple_encode(self.family.records[f.type.target], "_x", res)
        elif f.chain is not None:  # the previous item's stored value, passed as a param
            def chained_res(n: str) -> str:
                return "f__chain" if n == "_chain" else res(n)
            elem = (["_p0 = len(out)"]
                    + self.encode_one(rec, f, self.chained_type(f), "_x", chained_res, False)
                    + [f"f__chain = {self.chain_read(f, 'out', '_p0', 'len(out)')}"])
        else:
            elem = self.encode_one(rec, f, f.type, "_x", res, False)
        out.append(f"for _x in {val}:")
        if rp.until is not None:
            out += [f"    if _x == {rp.until!r}:",
                    f"        raise EncodeError('an item equals the terminator {rp.until!r}', "
                    f"path={f.name!r})"]
        out += ["    " + x for x in elem]
        if rp.until is not None:
            out += self.encode_one(rec, f, f.type, repr(rp.until), res, False)
        return out

    def encode_checksum(self, rec: ir.Record, f: ir.Field, spans: set[str],
                        patch: bool = False) -> list[str]:
        index = next(i for i, x in enumerate(self.lay.fields) if x is f)
        expr = self.checksum_expr(self.lay, index, "memoryview(out)", "start", self.enc_res)
        pack, pack_into = self.ck_packers(f.type)
        width = self.ck_width(f.type)
        late = cover.anchor(self.lay.fields, index, encode=True) is not None
        if late and patch:  # every byte it covers is written: computed, written over
            inner = [f"f_{f.name} = {expr}", pack_into(f"_atck_{f.name}", f"f_{f.name}")]
        elif late:  # its place: the filler as a placeholder
            fill = self.const("FB", repr(cover.filler_bytes(f.checksum, width)))
            inner = ([f"_s_{f.name} = len(out)"] if f.name in spans.s else []) + [
                f"_atck_{f.name} = len(out)", f"out += {fill}"] + (
                [f"_e_{f.name} = len(out)"] if f.name in spans.e else [])
        elif patch:  # deferred: the covered size field has just been patched
            inner = [pack_into(f"_atck_{f.name}", expr)]
        elif any(f is c for cks in self.deferred.values() for c in cks):
            zero = f"bytes({width})" if isinstance(f.type, ir.VarintT) else pack("0")
            inner = [f"_atck_{f.name} = len(out)", f"out += {zero}"]
        else:
            # kept in a local: a later seed/chain expression may read it
            inner = [f"f_{f.name} = {expr}", f"out += {pack(f'f_{f.name}')}"]
        if f.cond is not None:
            return [f"if {f.cond.render(self.enc_res)}:"] + ["    " + x for x in inner]
        return inner


# -- optimistic decoding -------------------------------------------------------------
# A record's checked decoder tests the bounds before every read. Its optimistic twin
# (``_u_<record>``, and ``_m_<record>`` for a whole log in one loop) leaves out the tests
# that the buffer itself or one final ``pos <= end`` makes redundant: a read past the
# buffer raises (IndexError, struct.error), a slice past ``end`` is short but advances
# ``pos`` past ``end`` all the same, and ``pos`` only grows (a statement that could move
# it back is preceded by an overrun test). Any exception, or a final ``pos > end``,
# re-runs the checked decoder from the record's start: it raises the authoritative
# error (same type, offset and path) or returns the same value. Every other check
# (enums, constants, reserved bytes, checksums, counts, zero-size items) stays.

_UNSIGNED_CODES = set("BHILQN")
_HELPERS = frozenset({"_out", "_append", "_rs", "_p0"})


def _tail_returns(body: list[ast.stmt]) -> list[ast.Return] | None:
    """The returns that end ``body`` (its last statement, or the last statement of
    each branch of a final ``if``), when each returns ``(value, pos)`` or a decoder
    call's result; None when the body ends otherwise."""
    last = body[-1] if body else None
    if isinstance(last, ast.If) and last.orelse:
        a, b = _tail_returns(last.body), _tail_returns(last.orelse)
        return None if a is None or b is None else a + b
    if not isinstance(last, ast.Return):
        return None
    v = last.value
    if isinstance(v, ast.Tuple) and len(v.elts) == 2 and _is_name(v.elts[1], "pos"):
        return [last]
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id.startswith("_d_"):
        return [last]
    return None


def _returns_to_target(body: list[ast.stmt]) -> None:
    """Turn the tail returns of ``body`` (see :func:`_tail_returns`) into stores to
    ``__TARGET__`` (and ``pos``), for a body inlined into its caller."""
    last = body[-1]
    if isinstance(last, ast.If):
        _returns_to_target(last.body)
        _returns_to_target(last.orelse)
        return
    v = last.value
    if isinstance(v, ast.Tuple):
        body[-1] = ast.Assign(targets=[ast.Name("__TARGET__", ast.Store())],
                              value=v.elts[0], lineno=0)
    else:
        body[-1] = ast.Assign(targets=[ast.Tuple([ast.Name("__TARGET__", ast.Store()),
                                                  ast.Name("pos", ast.Store())], ast.Store())],
                              value=v, lineno=0)


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _raises(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Raise)


_stmt_lists = stmt_lists


class Optimist:
    """Build the optimistic twin of one checked decoder (see the comment above)."""

    def __init__(self, formats: dict[str, str], has_twin=None) -> None:
        self.formats = formats  # struct constant name -> format
        self.has_twin = has_twin or (lambda name: False)

    # which locals are provably >= 0 (every assignment to them is)
    def nonneg(self, fn: ast.FunctionDef, guards: bool = True) -> set[str]:
        """Locals provably >= 0: every assignment to them is (a greatest fixed point, so
        a name is trusted only if each of its sources is, whatever the visiting order).
        With ``guards``, an assignment followed by ``if x < 0 ...: raise`` counts too."""
        return self.nonneg_both(fn)[0 if guards else 1]

    def nonneg_both(self, fn: ast.FunctionDef) -> tuple[set[str], set[str]]:
        """:meth:`nonneg` with and without the guards, from one walk of ``fn``."""
        seen: set[int] = set()
        # (name, value or struct code, guarded)
        assigns: list[tuple[str, object, bool]] = []

        def guarded(stmts: list[ast.stmt], i: int, name: str) -> bool:
            if i >= len(stmts) or not isinstance(stmts[i], ast.If) \
                    or not _raises(stmts[i].body):
                return False
            t = stmts[i].test
            tests = t.values if isinstance(t, ast.BoolOp) and isinstance(t.op, ast.Or) else [t]
            for c in tests:
                if isinstance(c, ast.Compare) and _is_name(c.left, name) and \
                        isinstance(c.ops[0], ast.Lt) and isinstance(c.comparators[0], ast.Constant) \
                        and c.comparators[0].value == 0 and len(c.ops) == 1:
                    return True
            return False

        for _parent, _attr, stmts in _stmt_lists(fn):
            for i, st in enumerate(stmts):
                if not isinstance(st, ast.Assign) or len(st.targets) != 1:
                    continue
                tgt, val = st.targets[0], st.value
                if isinstance(tgt, ast.Name):
                    seen.add(id(tgt))
                    assigns.append((tgt.id, val, guarded(stmts, i + 1, tgt.id)))
                elif isinstance(tgt, ast.Tuple) and all(isinstance(e, ast.Name) for e in tgt.elts):
                    codes = self.unpack_codes(val)
                    for k, e in enumerate(tgt.elts):
                        seen.add(id(e))
                        code = codes[k] if codes is not None and k < len(codes) else None
                        assigns.append((e.id, code, False))
        other = {n.id for n in walk(fn) if isinstance(n, ast.Name)
                 and not isinstance(n.ctx, ast.Load) and id(n) not in seen}
        start = {a[0] for a in assigns} - other
        return self._fixed_point(assigns, set(start), True), \
            self._fixed_point(assigns, set(start), False)

    def _fixed_point(self, assigns: list[tuple[str, object, bool]], cand: set[str],
                     guards: bool) -> set[str]:
        while True:
            bad = set()
            for name, src, guard in assigns:
                if isinstance(src, ast.expr):
                    good = (guards and guard) or self.expr_nonneg(src, cand)
                else:
                    good = src in _UNSIGNED_CODES
                if not good:
                    bad.add(name)
            if not bad & cand:
                return cand
            cand -= bad

    def unpack_codes(self, val: ast.expr) -> list[str] | None:
        if isinstance(val, ast.Call) and isinstance(val.func, ast.Attribute) \
                and val.func.attr == "unpack_from" and isinstance(val.func.value, ast.Name) \
                and val.func.value.id in self.formats:
            return efe.struct_items(self.formats[val.func.value.id])
        return None

    def expr_nonneg(self, e: ast.expr, ok: set[str]) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, int) and not isinstance(e.value, bool) and e.value >= 0
        if isinstance(e, ast.Name):
            return e.id in ok
        if isinstance(e, ast.Subscript) and _is_name(e.value, "mv") \
                and not isinstance(e.slice, ast.Slice):
            return True  # one byte
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) \
                and e.slice.value == 0:
            codes = self.unpack_codes(e.value)
            return bool(codes) and codes[0] in _UNSIGNED_CODES
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Mod):
                return isinstance(e.right, ast.Constant) and isinstance(e.right.value, int) \
                    and e.right.value > 0
            if isinstance(e.op, ast.BitAnd):
                return self.expr_nonneg(e.left, ok) or self.expr_nonneg(e.right, ok)
            if isinstance(e.op, (ast.Add, ast.Mult, ast.BitOr, ast.LShift, ast.RShift)):
                return self.expr_nonneg(e.left, ok) and self.expr_nonneg(e.right, ok)
        return False

    # the transformation
    def eligible(self, fn: ast.FunctionDef) -> bool:
        nodes = list(walk(fn))
        for n in nodes:
            if isinstance(n, ast.Name) and n.id in _HELPERS:
                return False
            if isinstance(n, ast.Name) and n.id == "mv" and not isinstance(n.ctx, ast.Load):
                return False  # decompressed sections swap the buffer
            if isinstance(n, ast.Try) and not all(_raises(h.body) for h in n.handlers):
                return False  # a handler that keeps going (stop-on-error lists)
            if isinstance(n, (ast.Try,)) and (n.orelse or n.finalbody):
                return False
            if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.Yield, ast.Global,
                              ast.Nonlocal)) and n is not fn:
                return False
        returns = [n for n in nodes if isinstance(n, ast.Return)]
        last = fn.body[-1]
        return returns == [last] and isinstance(last.value, ast.Tuple) \
            and len(last.value.elts) == 2 and _is_name(last.value.elts[1], "pos")

    def transform(self, fn: ast.FunctionDef) -> None:
        """Rewrite ``fn`` (a checked decoder) in place into its optimistic twin."""
        # the sign tests themselves may only go where no sign test is the proof
        # (``unsigned``: proven without them)
        ok, unsigned = self.nonneg_both(fn)

        def bound_check(st: ast.stmt, nxt: ast.stmt | None) -> bool:
            if not (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1
                    and isinstance(st.body[0], ast.Raise)):
                return False
            t = st.test
            if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Gt)
                    and _is_name(t.comparators[0], "end") and isinstance(t.left, ast.BinOp)
                    and isinstance(t.left.op, ast.Add) and _is_name(t.left.left, "pos")):
                return False
            if isinstance(nxt, ast.Assign) and isinstance(nxt.targets[0], ast.Name) \
                    and "_outer_end_" in nxt.targets[0].id:
                # a sized section's own size (kept: once per section; an inlined
                # callee's section has its locals prefixed)
                return False
            return self.expr_nonneg(t.left.right, ok)

        def monotone(st: ast.stmt) -> bool:
            """True unless ``st`` may move ``pos`` backwards."""
            if isinstance(st, (ast.If, ast.For, ast.While, ast.Try)):
                return True  # compound: its own statements are handled one by one
            if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) \
                    and _is_name(st.target, "pos"):
                return self.expr_nonneg(st.value, ok)
            return not any(isinstance(n, ast.Name) and n.id == "pos"
                           and not isinstance(n.ctx, ast.Load) for n in walk(st))

        def guard() -> ast.If:  # a node of its own at each place
            return ast.If(ast.Compare(ast.Name("pos", ast.Load()), [ast.Gt()],
                                      [ast.Name("end", ast.Load())]),
                          [ast.Raise(ast.Name("IndexError", ast.Load()))], [])

        def rewrite(stmts: list[ast.stmt]) -> list[ast.stmt]:
            out: list[ast.stmt] = []
            i = 0
            while i < len(stmts):
                st = stmts[i]
                nxt = stmts[i + 1] if i + 1 < len(stmts) else None
                if bound_check(st, nxt):
                    i += 1
                    continue
                # a closed enum: ``_v = T.get(x)`` / ``if _v is None: raise`` / ``x = _v``
                # becomes ``x = T[x]`` (an unknown value raises KeyError: checked re-run)
                if isinstance(st, ast.Assign) and _is_name(st.targets[0], "_v") \
                        and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Attribute) \
                        and st.value.func.attr == "get" and len(st.value.args) == 1 \
                        and i + 2 < len(stmts) and isinstance(stmts[i + 1], ast.If) \
                        and _raises(stmts[i + 1].body) and not stmts[i + 1].orelse \
                        and isinstance(stmts[i + 2], ast.Assign) \
                        and _is_name(stmts[i + 2].value, "_v") \
                        and isinstance(stmts[i + 2].targets[0], ast.Name):
                    x = stmts[i + 2].targets[0]
                    out.append(ast.Assign(targets=[x], value=ast.Subscript(
                        value=st.value.func.value, slice=st.value.args[0], ctx=ast.Load()),
                        lineno=0))
                    i += 3
                    continue
                if isinstance(st, ast.Try):
                    out += rewrite(st.body)  # error wrappers: the checked re-run has them
                    i += 1
                    continue
                if isinstance(st, ast.If):
                    st.test = self.drop_varint_bounds(st.test)
                    st.test = self.drop_sign_tests(st.test, unsigned)
                    pre = self.varint_once(st)
                    if pre is not None:
                        out.append(pre)
                self.call_twins(st)
                if not monotone(st):
                    out.append(guard())
                for attr in ("body", "orelse"):
                    lst = getattr(st, attr, None)
                    if isinstance(lst, list) and lst and isinstance(lst[0], ast.stmt):
                        setattr(st, attr, rewrite(lst) or [ast.Pass()])
                out.append(st)
                i += 1
            return out

        fn.body = rewrite(fn.body)
        for _parent, _attr, stmts in list(_stmt_lists(fn)):
            raw_switch_tags(stmts)
        drop_dead_stores(fn)
        propagate_copies(fn)

    @staticmethod
    def drop_sign_tests(test: ast.expr, ok: set[str]) -> ast.expr:
        """``n < 0 or <rest>`` -> ``<rest>`` where ``n`` is provably >= 0."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            keep = [c for c in test.values
                    if not (isinstance(c, ast.Compare) and len(c.ops) == 1
                            and isinstance(c.ops[0], ast.Lt) and isinstance(c.left, ast.Name)
                            and c.left.id in ok and isinstance(c.comparators[0], ast.Constant)
                            and c.comparators[0].value == 0)]
            if keep and len(keep) < len(test.values):
                return keep[0] if len(keep) == 1 else ast.BoolOp(op=ast.Or(), values=keep)
        return test

    def call_twins(self, st: ast.stmt) -> None:
        """``x, pos = _d_<sub>(...)`` -> ``_u_<sub>``: the sub-record read optimistically
        too (its overrun shows in ``pos``, its errors reach the same re-run)."""
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) \
                and isinstance(st.value.func, ast.Name) and st.value.func.id.startswith("_d_") \
                and self.has_twin(st.value.func.id[3:]):
            st.value.func.id = "_u_" + st.value.func.id[3:]

    @staticmethod
    def varint_once(st: ast.If) -> ast.stmt | None:
        """The inline varint reads its first byte once: ``x = mv[pos]`` before the
        test instead of indexing twice (rewrites ``st``; returns the new first line)."""
        t = st.test
        if not (isinstance(t, ast.Compare) and isinstance(t.left, ast.Subscript)
                and _is_name(t.left.value, "mv") and _is_name(t.left.slice, "pos")
                and isinstance(t.ops[0], ast.Lt) and len(st.body) == 2
                and isinstance(st.body[0], ast.Assign) and isinstance(st.body[0].targets[0], ast.Name)
                and ast.dump(st.body[0].value) == ast.dump(t.left)
                and len(st.orelse) == 1 and isinstance(st.orelse[0], ast.If)):
            return None
        x = st.body[0].targets[0].id
        inner = st.orelse[0]
        if not (inner.body and isinstance(inner.body[0], ast.Assign)
                and _is_name(inner.body[0].targets[0], x)):
            return None
        first = st.body[0]
        st.test = ast.Compare(left=ast.Name(x, ast.Load()), ops=t.ops, comparators=t.comparators)
        st.body = st.body[1:]
        read = ast.dump(t.left)

        class Sub(ast.NodeTransformer):
            def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
                return ast.Name(x, ast.Load()) if ast.dump(node) == read else node

        inner.body[0].value = Sub().visit(inner.body[0].value)
        return first

    @staticmethod
    def drop_varint_bounds(test: ast.expr) -> ast.expr:
        """``pos < end and mv[pos] < 128`` -> ``mv[pos] < 128`` (the read raises or
        moves ``pos`` past ``end``)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and len(test.values) == 2:
            a, b = test.values
            if isinstance(a, ast.Compare) and isinstance(a.ops[0], ast.Lt) \
                    and _is_name(a.comparators[0], "end") and (
                        _is_name(a.left, "pos") or (isinstance(a.left, ast.BinOp)
                                                    and _is_name(a.left.left, "pos"))) \
                    and isinstance(b, ast.Compare) and isinstance(b.left, ast.Subscript) \
                    and _is_name(b.left.value, "mv"):
                return b
        return test


def _rows_transform(fn: ast.FunctionDef, classes: set[str]) -> str | None:
    """Turn the many-loop ``fn`` (see ``FastEmitter.rows_loop``) into its rows twin in
    place; returns why it cannot (None: done)."""
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and re.match(r"_[dum]_", n.func.id):
            return f"its loop decodes a sub-record out of line ({n.func.id})"

    def obj_of(st: ast.stmt) -> str | None:
        """The target of ``X = _new(Cls)`` / ``X = Cls()`` for a record class."""
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call)
                and isinstance(st.value.func, ast.Name)):
            return None
        call = st.value
        if call.func.id == "_new" and len(call.args) == 1 and isinstance(call.args[0], ast.Name) \
                and call.args[0].id in classes:
            return st.targets[0].id
        if call.func.id in classes and not call.args and not call.keywords:
            return st.targets[0].id
        return None

    def stored(st: ast.stmt, target: str) -> ast.expr | None:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Attribute) \
                and isinstance(st.targets[0].value, ast.Name) and st.targets[0].value.id == target:
            return st.value
        return None

    def rewrite(stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        i = 0
        while i < len(stmts):
            st = stmts[i]
            target = obj_of(st)
            if target is None:
                out.append(st)
                i += 1
                continue
            values = []
            i += 1
            while i < len(stmts) and (v := stored(stmts[i], target)) is not None:
                values.append(v)
                i += 1
            out.append(ast.Assign([ast.Name(target, ast.Store())],
                                  ast.Tuple(values, ast.Load()), lineno=0))
        return out

    class Rows(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "PackedArray":
                return node.args[0]  # a packed view is its raw bytes
            if isinstance(node.func, ast.Name) and node.func.id == "_rest":
                return _rows_result("_rs")  # stop at the record the loop does not take
            return node

        def visit_Return(self, node: ast.Return) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.value, ast.Name) and node.value.id == "_out":
                return ast.Return(_rows_result("max(_p0, _end)"))
            return node

    for node, attr, stmts in list(_stmt_lists(fn)):
        setattr(node, attr, rewrite(stmts))
    Rows().visit(fn)
    # where each record starts, beside its row (the appends are the loop's own lines)
    taken = ast.parse("_starts = []\n_sappend = _starts.append").body
    first = next(i for i, st in enumerate(fn.body) if isinstance(st, ast.Try))
    fn.body[first:first] = taken

    class Starts(ast.NodeTransformer):
        def visit_Expr(self, node: ast.Expr) -> ast.AST | list[ast.stmt]:
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) \
                    and call.func.id == "_append":
                return [ast.parse("_sappend(_rs)").body[0], node]
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == "_out" \
                    and call.func.attr == "pop":
                return [node, ast.parse("_starts.pop()").body[0]]
            return node
    Starts().visit(fn)
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_new":
            return "a record object is built in a way the loop cannot turn into a row"
    return None


def _rows_result(stop: str) -> ast.expr:
    return ast.parse(f"(_out, _starts, {stop})", mode="eval").body


def loop_checksums(fn: ast.FunctionDef) -> None:
    """In the many-record encode loop a trailing checksum always slices the buffer
    (``memoryview(out)[s:]``: the whole-buffer shortcut only pays for one record), and
    a checksum kept in a local only to be packed next is packed directly."""
    class Slice(ast.NodeTransformer):
        def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
            self.generic_visit(node)
            t = node.test
            if _is_name(node.body, "out") and isinstance(t, ast.Compare) \
                    and isinstance(t.left, ast.Name) and t.left.id.startswith("_s_") \
                    and isinstance(node.orelse, ast.Subscript) \
                    and isinstance(node.orelse.slice, ast.Slice) \
                    and _is_name(node.orelse.slice.lower, t.left.id) \
                    and node.orelse.slice.upper is None:
                return node.orelse
            return node

    Slice().visit(fn)
    loads: dict[str, int] = {}
    for n in walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads[n.id] = loads.get(n.id, 0) + 1
    for parent, attr, stmts in list(_stmt_lists(fn)):
        keep: list[ast.stmt] = []
        i = 0
        while i < len(stmts):
            st = stmts[i]
            nxt = stmts[i + 1] if i + 1 < len(stmts) else None
            if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    and isinstance(st.targets[0], ast.Name) and st.targets[0].id.startswith("f_") \
                    and loads.get(st.targets[0].id) == 1 and isinstance(nxt, ast.AugAssign) \
                    and _is_name(nxt.target, "out") and isinstance(nxt.value, ast.Call) \
                    and len(nxt.value.args) == 1 and _is_name(nxt.value.args[0], st.targets[0].id):
                nxt.value.args[0] = st.value
                i += 1
                continue
            keep.append(st)
            i += 1
        setattr(parent, attr, keep or [ast.Pass()])


def _is_out_append(st: ast.stmt) -> bool:
    return isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) \
        and _is_name(st.target, "out")


GATHER_MIN_PIECES = 3  # fewer pieces: a list and a join cost more than the += saved


def gather_parts(body: list[ast.stmt], direct: str | None = None) -> bool:
    """Rewrite one record's many-loop encoder body (in place) to collect its pieces in a
    list joined once per record, instead of ``out += piece`` for each. Each ``+=`` on
    the bytearray costs a buffer request, a resize and a copy (~430 machine
    instructions per piece, 6+ pieces per record); ``list.append`` is a specialized call,
    and the record reaches ``out`` in one ``+=``. A trailing checksum over the record
    (``_s_x = len(out)`` before any piece, ``out += f(memoryview(out)[_s_x:])`` last) is
    taken over the record's joined bytes. With ``direct`` (the name of a list's append)
    a record without such a checksum appends its pieces there itself: no list and no
    join per record. False (body untouched) when ``out`` is used any other way
    (offsets, patches) or the record has few pieces."""
    if not body:
        return False
    last = body[-1]
    mark = None
    # the first statement that touches ``out`` (values computed before it stay)
    at = next((i for i, st in enumerate(body)
               if any(_is_name(n, "out") for n in walk(st))), None)
    if at is None:
        return False
    first = body[at]
    if isinstance(first, ast.Assign) and len(first.targets) == 1 \
            and isinstance(first.targets[0], ast.Name) and first.targets[0].id.startswith("_s_") \
            and isinstance(first.value, ast.Call) and _is_name(first.value.func, "len") \
            and len(first.value.args) == 1 and _is_name(first.value.args[0], "out"):
        mark = first.targets[0].id
    views: list[ast.Subscript] = []
    if mark is not None:
        if not _is_out_append(last):
            return False
        for n in walk(last.value):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Call) \
                    and _is_name(n.value.func, "memoryview") and len(n.value.args) == 1 \
                    and _is_name(n.value.args[0], "out") and isinstance(n.slice, ast.Slice) \
                    and _is_name(n.slice.lower, mark) and n.slice.upper is None \
                    and n.slice.step is None:
                views.append(n)
        if len(views) != 1:
            return False
    # every other ``out`` is the target of ``out += piece``; the mark is read only by the view
    allowed = {id(first.value.args[0]), id(views[0].value.args[0])} if mark else set()
    pieces = 0
    for st in body:
        for n in walk(st):
            if isinstance(n, ast.AugAssign) and _is_name(n.target, "out"):
                if not isinstance(n.op, ast.Add):
                    return False
                allowed.add(id(n.target))
                pieces += 1
    if pieces - (mark is not None) < GATHER_MIN_PIECES:
        return False
    for st in body:
        for n in walk(st):
            if isinstance(n, ast.Name) and (n.id == "out" and id(n) not in allowed
                                            or mark and n.id == mark and n is not views[0].slice.lower
                                            and n is not first.targets[0]):
                return False

    def appends(stmts: list[ast.stmt], to: ast.expr | None = None) -> None:
        # every statement list under ``stmts`` once (``_stmt_lists`` already descends)
        lists = [stmts] + [inner for st in stmts for _parent, _attr, inner in _stmt_lists(st)]
        for lst in lists:
            for i, st in enumerate(lst):
                if _is_out_append(st):
                    fn = copy.deepcopy(to) if to is not None else \
                        ast.Attribute(ast.Name("_p", ast.Load()), "append", ast.Load())
                    lst[i] = ast.Expr(ast.Call(fn, [st.value], []))

    if mark is None and direct is not None:
        # no checksum over the record: its pieces go straight to the caller's list
        # (``direct``: the name of its append), with no list and no join per record
        appends(body, ast.Name(direct, ast.Load()))
    elif mark is None:
        appends(body)
        body.insert(at, ast.parse("_p = []").body[0])
        body.extend(ast.parse("out += b''.join(_p)").body)
    else:
        view = views[0]

        class Joined(ast.NodeTransformer):  # the record so far is the joined bytes
            def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
                return ast.Name("_b", ast.Load()) if node is view else self.generic_visit(node)

        last.value = Joined().visit(last.value)
        body[at] = ast.parse("_p = []").body[0]
        del body[-1]
        appends(body)
        body.extend(ast.parse("_b = b''.join(_p)\nout += _b").body)
        body.append(last)
    for st in body:
        ast.fix_missing_locations(st)
    return True


def raw_switch_tags(stmts: list[ast.stmt]) -> None:
    """A switch on a field converted to its enum member (``x = T[x]`` ... ``_tag = x``)
    compares the stored int instead: ``_tag = x`` moves before the conversion. The cases
    compare equal either way (IntEnum); int == int is the interpreter's fast path."""
    i = 0
    while i < len(stmts):
        st = stmts[i]
        if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Name) and st.targets[0].id.endswith("_tag") \
                and isinstance(st.value, ast.Name):
            x, y = st.value.id, st.targets[0].id
            for j in range(i - 1, -1, -1):
                prev = stmts[j]
                if isinstance(prev, ast.Assign) and _is_name(prev.targets[0], x) \
                        and isinstance(prev.value, ast.Subscript) \
                        and _is_name(prev.value.slice, x) and isinstance(prev.value.value, ast.Name):
                    stmts.insert(j, stmts.pop(i))
                    break
                if any(isinstance(n, ast.Name) and n.id in (x, y) for n in walk(prev)):
                    break  # read or written in between: leave it
        i += 1


FUSE_MAX_BYTES = 512  # a speculative read longer than this could miss near every end


def _struct_read(st: ast.stmt, formats: dict[str, str]) -> str | None:
    """The struct constant of ``a, b = _Sn.unpack_from(mv, pos)``, else None."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Tuple)
            and all(isinstance(e, ast.Name) for e in st.targets[0].elts)):
        return None
    v = st.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr == "unpack_from" and isinstance(v.func.value, ast.Name) \
            and v.func.value.id in formats and len(v.args) == 2 and not v.keywords \
            and _is_name(v.args[0], "mv") and _is_name(v.args[1], "pos"):
        return v.func.value.id
    return None


def _stores(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)
            and not isinstance(n.ctx, ast.Load)}


def _next_read(stmts: list[ast.stmt], start: int, delta: int, formats: dict[str, str],
               written: set[str]):
    """Follow the path the first case of every switch takes from ``stmts[start]`` to the
    next fixed read: ``(list, index, offset from the first read)``, or None when ``pos``
    moves by an amount not known here, or a loop, a ``try`` or the buffer comes first.
    ``written`` collects the names stored on the way."""
    for j in range(start, len(stmts)):
        st = stmts[j]
        if _struct_read(st, formats):
            return stmts, j, delta
        if isinstance(st, ast.AugAssign) and _is_name(st.target, "pos"):
            if not (isinstance(st.op, ast.Add) and isinstance(st.value, ast.Constant)
                    and isinstance(st.value.value, int)):
                return None
            delta += st.value.value
            continue
        if isinstance(st, ast.If):
            if {"pos", "mv"} & _stores(st.test):
                return None
            if _raises(st.body) and not st.orelse:
                continue  # a check: past it, the path goes on
            written |= _stores(st.test)
            return _next_read(st.body, 0, delta, formats, written)
        if not isinstance(st, (ast.Assign, ast.AugAssign, ast.Expr)):
            return None
        got = _stores(st)
        if {"pos", "mv"} & got:
            return None
        written |= got
    return None


_IS_BYTES = "_isb = mv.__class__ is bytes"


def bytes_slices(fn: ast.FunctionDef, decode_const) -> bool:
    """Copies and text out of a ``bytes`` buffer without a constructor call.

    The twins read ``bytes`` (a log read whole, a replay's window) or a ``memoryview``
    (a mapped file). A slice of ``bytes`` is already the ``bytes`` value, and
    ``bytes.decode`` on it skips ``str(x, encoding)``'s argument tuple and codec name
    lookup: ``bytes(mv[a:b])`` and ``str(mv[a:b], enc)`` become ``(mv[a:b] if _isb else
    bytes(mv[a:b]))`` and ``(<bytes.decode>(mv[a:b]) if _isb else str(mv[a:b], enc))``
    (measured per call on bytes: 126 -> 63 ns and 121 -> 81 ns; a memoryview pays one
    local test). ``decode_const()`` names the module's ``bytes.decode``. Returns whether
    anything was rewritten (the caller then sets ``_isb``)."""
    changed = False

    def buffer_slice(node: ast.expr) -> bool:
        return isinstance(node, ast.Subscript) and _is_name(node.value, "mv") \
            and isinstance(node.slice, ast.Slice)

    class Rewrite(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            nonlocal changed
            self.generic_visit(node)
            if not isinstance(node.func, ast.Name) or node.keywords \
                    or not node.args or not buffer_slice(node.args[0]):
                return node
            sl = node.args[0]
            if node.func.id == "bytes" and len(node.args) == 1:
                fast: ast.expr = sl
            elif node.func.id == "str" and len(node.args) == 2 \
                    and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str):
                enc = node.args[1].value
                utf8 = enc.lower().replace("_", "-") in ("utf-8", "utf8")
                fast = ast.Call(ast.Name(decode_const(), ast.Load()),
                                [sl] if utf8 else [sl, ast.Constant(enc)], [])
            else:
                return node
            changed = True
            return ast.IfExp(ast.Name("_isb", ast.Load()), fast, node)

    Rewrite().visit(fn)
    return changed


def fuse_reads(fn: ast.FunctionDef, formats: dict[str, str], new_struct) -> None:
    """Speculative fixed runs, for an optimistic twin: a fixed read followed, on the
    path the first switch cases take, by further fixed reads at known offsets becomes
    one read of all of them (one ``unpack_from`` per record where a schema's common
    case nests a switch or two deep, as a frame whose kind selects its body).

    The values are those the separate reads would see, read earlier; on another case
    they are unused. A fused read may reach past the buffer where the separate reads
    would not: ``struct.error``, which sends the twin's caller to the checked decoder
    like any other miss. ``new_struct(fmt)`` names the fused ``Struct``."""
    for _parent, _attr, stmts in list(_stmt_lists(fn)):
        i = 0
        while i < len(stmts):
            sname = _struct_read(stmts[i], formats)
            if sname is None:
                i += 1
                continue
            fmt = formats[sname]
            head, body = fmt[:1], fmt[1:]
            size = struct.calcsize(fmt)
            targets = list(stmts[i].targets[0].elts)
            fused = False
            where = (stmts, i + 1, 0)
            while True:
                written: set[str] = set()
                found = _next_read(where[0], where[1], where[2], formats, written)
                if found is None:
                    break
                lst, j, delta = found
                other = formats[_struct_read(lst[j], formats)]
                names = {e.id for e in lst[j].targets[0].elts}
                gap = delta - size
                osize = struct.calcsize(other)
                if other[:1] != head or head not in "<>!=" or gap < 0 \
                        or delta + osize > FUSE_MAX_BYTES or names & written \
                        or names & {e.id for e in targets}:
                    break
                body += (f"{gap}x" if gap else "") + other[1:]
                size = delta + osize
                targets += lst[j].targets[0].elts
                del lst[j]
                if not lst:
                    lst.append(ast.Pass())
                fused = True
                where = (lst, j, delta)
            if fused:
                fmt = head + body
                name = new_struct(fmt)
                formats[name] = fmt
                stmts[i] = ast.Assign(
                    targets=[ast.Tuple(targets, ast.Store())],
                    value=ast.parse(f"{name}.unpack_from(mv, pos)").body[0].value, lineno=0)
                ast.fix_missing_locations(stmts[i])
            i += 1


def _source_order(fn: ast.FunctionDef) -> tuple[dict[int, int], list[ast.Name]]:
    """Statement ``id`` -> its rank in source order, and each name -> the rank of the
    statement holding it outside any nested body (an ``if`` test ranks with its ``if``,
    before its body); and every name of ``fn``. Comparing ranks compares source
    positions wherever a name and a statement are not the same statement: no unparse
    and re-parse for line numbers, and one walk."""
    rank: dict[int, int] = {}
    names: list[ast.Name] = []
    todo: list[ast.AST] = [fn]
    k = 0

    def mark(x: ast.AST) -> None:
        for n in walk(x):
            rank[id(n)] = k
            if n.__class__ is ast.Name:
                names.append(n)

    while todo:
        st = todo.pop()
        k += 1
        rank[id(st)] = k
        nested: list[ast.AST] = []
        for field in st._fields:
            v = getattr(st, field, None)
            if isinstance(v, list) and v and isinstance(v[0], (ast.stmt, ast.excepthandler)):
                nested += v
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, ast.AST):
                        mark(x)
            elif isinstance(v, ast.AST):
                mark(v)
        todo.extend(reversed(nested))
    return rank, names


def propagate_copies(fn: ast.FunctionDef) -> None:
    """``y = x`` where both are assigned once, side by side in one block, and ``y`` is
    not read before: ``y`` is replaced by ``x`` (one store and load less per record)."""
    order, names = _source_order(fn)
    stores: dict[str, int] = {}
    loads_of: dict[str, list[ast.Name]] = {}
    for n in names:
        if isinstance(n.ctx, ast.Load):
            loads_of.setdefault(n.id, []).append(n)
        else:
            stores[n.id] = stores.get(n.id, 0) + 1
    for parent, attr, stmts in list(_stmt_lists(fn)):
        defined: set[str] = set()
        keep = []
        for st in stmts:
            # assigned at this level only (a store nested in a branch may not have run)
            for t in st.targets if isinstance(st, ast.Assign) else ():
                for n in walk(t):
                    if isinstance(n, ast.Name):
                        defined.add(n.id)
            if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Name):
                y, x = st.targets[0].id, st.value.id
                if stores.get(y) == 1 and stores.get(x) == 1 and x in defined and x != y \
                        and x not in {"pos", "end", "mv"} and y not in {"pos", "end", "mv"}:
                    uses = loads_of.get(y, [])
                    if all(order[id(n)] > order[id(st)] for n in uses):
                        for n in uses:
                            n.id = x
                        loads_of.setdefault(x, []).extend(uses)
                        loads_of[y] = []
                        continue
            keep.append(st)
        setattr(parent, attr, keep or [ast.Pass()])


def drop_dead_stores(fn: ast.FunctionDef) -> None:
    """Remove ``x = <name or constant>`` and ``x += <constant>`` whose ``x`` is never
    read (offsets kept for error messages that a variant does not raise)."""
    while True:
        loads = {n.id for n in walk(fn) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Load)}
        changed = False
        for _parent, attr, stmts in list(_stmt_lists(fn)):
            keep = []
            for st in stmts:
                dead = False
                if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                        and isinstance(st.targets[0], ast.Name) \
                        and st.targets[0].id not in loads and st.targets[0].id != "pos" \
                        and isinstance(st.value, (ast.Name, ast.Constant)):
                    dead = True
                if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) \
                        and st.target.id not in loads and isinstance(st.value, ast.Constant):
                    dead = True
                if dead:
                    changed = True
                else:
                    keep.append(st)
            setattr(_parent, attr, keep or [ast.Pass()])
        if not changed:
            return


# -- many-record encoders: lengths known ahead, one pack per fixed run ------------------------

def _pack_call(e: ast.expr, formats: dict[str, str]) -> str | None:
    """The struct constant of ``_SNN.pack(...)`` (positional arguments only), or None."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "pack" \
            and isinstance(e.func.value, ast.Name) and e.func.value.id in formats \
            and not e.keywords and not any(isinstance(a, ast.Starred) for a in e.args):
        return e.func.value.id
    return None


def _len_mark(st: ast.stmt) -> str | None:
    """``S = len(out)``: the name S."""
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
            and isinstance(st.value, ast.Call) and _is_name(st.value.func, "len") \
            and len(st.value.args) == 1 and _is_name(st.value.args[0], "out"):
        return st.targets[0].id
    return None


def _padding_of(e: ast.expr) -> tuple[str, int] | None:
    """``bytes((-(len(out) - S)) % A)``: (S, A)."""
    if not (isinstance(e, ast.Call) and _is_name(e.func, "bytes") and len(e.args) == 1):
        return None
    m = e.args[0]
    if not (isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod)
            and isinstance(m.right, ast.Constant) and isinstance(m.right.value, int)
            and isinstance(m.left, ast.UnaryOp) and isinstance(m.left.op, ast.USub)):
        return None
    d = m.left.operand
    if isinstance(d, ast.BinOp) and isinstance(d.op, ast.Sub) and isinstance(d.left, ast.Call) \
            and _is_name(d.left.func, "len") and len(d.left.args) == 1 \
            and _is_name(d.left.args[0], "out") and isinstance(d.right, ast.Name):
        return d.right.id, m.right.value
    return None


def _sub_lists(st: ast.stmt):
    for attr in ("body", "orelse", "finalbody"):
        sub = getattr(st, attr, None)
        if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
            yield sub
    for h in getattr(st, "handlers", []) or []:
        yield h.body


def static_padding(stmts: list[ast.stmt], formats: dict[str, str]) -> None:
    """``S = len(out)``, then pieces whose lengths are known (struct packs, bytes
    constants, ``bytes`` locals), then ``out += bytes(-(len(out) - S) % A)``: the padding
    is computed from those lengths (``bytes(-(k + len(b)) % A)``). The encoder then no
    longer asks ``out`` for its length, which is what keeps its records from being
    gathered (``gather_parts``); marks left unread are dropped (``drop_len_marks``)."""
    _static_padding(stmts, formats, {})


def _static_padding(stmts: list[ast.stmt], formats: dict[str, str],
                    seen: dict[int, tuple[set[str], bool]]) -> None:
    """:func:`static_padding` over ``stmts``, inner lists first; ``seen`` keeps what each
    statement stores and whether it touches ``out`` (a statement is final once its own
    list is done), so each statement is walked once however deep it nests."""
    for st in stmts:
        for sub in _sub_lists(st):
            _static_padding(sub, formats, seen)
    track: dict[str, list | None] = {}  # mark -> [bytes so far, bytes locals so far]
    for st in stmts:
        mark = _len_mark(st)
        if mark is not None:
            track[mark] = [0, []]
            continue
        if _is_out_append(st):
            pad = _padding_of(st.value)
            if pad is not None and track.get(pad[0]) is not None:
                k, names = track[pad[0]]  # type: ignore[misc]
                terms: list[ast.expr] = [ast.Constant(k)] if k or not names else []
                terms += [ast.Call(ast.Name("len", ast.Load()), [ast.Name(n, ast.Load())], [])
                          for n in names]
                total = terms[0]
                for t in terms[1:]:
                    total = ast.BinOp(total, ast.Add(), t)
                st.value = ast.Call(ast.Name("bytes", ast.Load()), [ast.BinOp(
                    ast.UnaryOp(ast.USub(), total), ast.Mod(), ast.Constant(pad[1]))], [])
            piece = st.value
            name = _pack_call(piece, formats)
            size = struct.calcsize(formats[name]) if name else \
                len(piece.value) if isinstance(piece, ast.Constant) \
                and isinstance(piece.value, bytes) else None
            for m, t in track.items():
                if t is None:
                    continue
                if size is not None:
                    t[0] += size
                elif isinstance(piece, ast.Name):
                    t[1].append(piece.id)
                else:
                    track[m] = None
            continue
        stores, touches = _stores_touches(st, seen)
        for m, t in track.items():
            if t is not None and (touches or m in stores or stores & set(t[1])):
                track[m] = None


_BODIES = ("body", "orelse", "finalbody")


def _stores_touches(st: ast.stmt, seen: dict[int, tuple[set[str], bool]]) -> tuple[set[str], bool]:
    """The names ``st`` stores and whether it names ``out`` anywhere; nested statements
    come from (and go to) ``seen``."""
    got = seen.get(id(st))
    if got is not None:
        return got
    stores: set[str] = set()
    touches = False
    parts: list[ast.AST] = []
    for field in st._fields:
        v = getattr(st, field, None)
        if field in _BODIES and isinstance(v, list) and v and isinstance(v[0], ast.stmt):
            for inner in v:
                s2, t2 = _stores_touches(inner, seen)
                stores |= s2
                touches = touches or t2
        elif field == "handlers" and isinstance(v, list):
            for h in v:
                parts += [x for x in (h.type,) if x is not None]
                for inner in h.body:
                    s2, t2 = _stores_touches(inner, seen)
                    stores |= s2
                    touches = touches or t2
        elif isinstance(v, list):
            parts += [x for x in v if isinstance(x, ast.AST)]
        elif isinstance(v, ast.AST):
            parts.append(v)
    for part in parts:
        for n in walk(part):
            if isinstance(n, ast.Name):
                if not isinstance(n.ctx, ast.Load):
                    stores.add(n.id)
                if n.id == "out":
                    touches = True
    got = seen[id(st)] = (stores, touches)
    return got


def drop_len_marks(fn: ast.FunctionDef) -> None:
    """Remove ``S = len(out)`` where nothing reads S."""
    loads = {n.id for n in walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for _parent, _attr, stmts in list(_stmt_lists(fn)):
        keep = [st for st in stmts if _len_mark(st) is None or _len_mark(st) in loads]
        if len(keep) != len(stmts):
            stmts[:] = keep or [ast.Pass()]


def _pure(e: ast.expr) -> bool:
    """An expression that only reads (names, attributes, constants, comparisons)."""
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Constant, ast.Load, ast.Compare,
                              ast.cmpop, ast.BoolOp, ast.boolop, ast.Tuple))
               for n in walk(e))


def _pure_assign(st: ast.stmt) -> set[str] | None:
    """The names a side-effect-free ``x = <reads>`` stores, or None."""
    if isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets) \
            and _pure(st.value) and not any(_is_name(n, "out") for n in walk(st.value)):
        return {t.id for t in st.targets}  # type: ignore[union-attr]
    return None


def _leads_to_pack(stmts: list[ast.stmt], formats: dict[str, str], order: str) -> bool:
    """Whether a write moved to the start of ``stmts`` would fuse: reads, then a fixed
    write of the same byte order (directly, or first thing in the first case of a switch
    on those reads). A write is moved into a switch's cases only then: otherwise it
    would only be copied into each case, to no gain."""
    for st in stmts:
        if _pure_assign(st) is not None:
            continue
        if _is_out_append(st):
            name = _pack_call(st.value, formats)
            return name is not None and formats[name][:1] == order
        if isinstance(st, ast.If) and _pure(st.test):
            return _leads_to_pack(st.body, formats, order)
        return False
    return False


def fuse_packs(stmts: list[ast.stmt], formats: dict[str, str], new_struct) -> None:
    """Consecutive fixed writes become one: ``out += A.pack(a...)``, reads only, then
    ``out += B.pack(b...)`` is ``out += AB.pack(a..., b...)``; a write followed by reads
    and a switch on them moves into each case first, so that a tag and the case's first
    fixed run (and that case's own first nested case) are packed in one call. Only for the
    many-record encoders: a write whose values fail raises as before, at most a few lines
    later, and the checked per-record loop reports it. ``new_struct(fmt)`` names the fused
    ``Struct``. Formats must be little- or big-endian standard sizes (``<``/``>``): no
    alignment, so a concatenation packs exactly the bytes the two packs did."""
    i = 0
    while i < len(stmts):
        st = stmts[i]
        name = _pack_call(st.value, formats) if _is_out_append(st) else None
        if name is None or formats[name][:1] not in "<>":
            i += 1
            continue
        reads = {n.id for a in st.value.args for n in walk(a) if isinstance(n, ast.Name)}
        j = i + 1
        stored: set[str] = set()
        while j < len(stmts) and (s := _pure_assign(stmts[j])) is not None:
            stored |= s
            j += 1
        if j >= len(stmts) or stored & reads:
            i += 1
            continue
        nxt = stmts[j]
        other = _pack_call(nxt.value, formats) if _is_out_append(nxt) else None
        if other is not None and formats[other][:1] == formats[name][:1]:
            fmt = formats[name] + formats[other][1:]
            fused = new_struct(fmt)
            formats[fused] = fmt
            nxt.value = ast.Call(ast.Attribute(ast.Name(fused, ast.Load()), "pack", ast.Load()),
                                 st.value.args + nxt.value.args, [])
            del stmts[i]
            continue  # the fused write may fuse again with what follows it
        if isinstance(nxt, ast.If) and _pure(nxt.test) and nxt.body \
                and _leads_to_pack(nxt.body, formats, formats[name][:1]):
            # into every branch (``elif`` is an ``If`` alone in ``orelse``: handled there)
            nxt.body.insert(0, copy.deepcopy(st))
            if nxt.orelse:
                nxt.orelse.insert(0, copy.deepcopy(st))
            else:
                nxt.orelse = [copy.deepcopy(st)]
            del stmts[i]
            continue
        i += 1
    for st in stmts:
        for sub in _sub_lists(st):
            fuse_packs(sub, formats, new_struct)


SMALL_LENGTHS = 256  # lengths below this are written from a prebuilt table


def small_length_packs(fn: ast.FunctionDef, formats: dict[str, str], new_table) -> int:
    """``A.pack(len(x))``, ``A`` one unsigned integer (a length prefix), becomes
    ``T[_ln] if (_ln := len(x)) < 256 else A.pack(_ln)``: the bytes of a short length
    from a prebuilt tuple, with no call (a length is an exact int >= 0, so the index is
    its value); longer ones, and one too large for ``A``, go to ``pack`` and its error
    as before. Only for the many-record encoders. ``new_table(fmt)`` names the tuple of
    ``pack(0) .. pack(255)``. Returns how many writes were rewritten."""
    done = 0
    if not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "pack" and len(n.args) == 1
               and isinstance(n.args[0], ast.Call) for n in walk(fn)):
        return 0  # no ``pack`` of one call's value: nothing to rewrite

    class Rewrite(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            nonlocal done
            self.generic_visit(node)
            name = _pack_call(node, formats)
            fmt = formats.get(name or "", "")
            if name is None or len(node.args) != 1 or fmt[:1] not in "<>" \
                    or fmt[1:] not in tuple(_UNSIGNED_CODES - {"N"}):
                return node
            arg = node.args[0]
            if not (isinstance(arg, ast.Call) and _is_name(arg.func, "len")
                    and len(arg.args) == 1 and not arg.keywords):
                return node
            done += 1
            table = new_table(fmt)
            fallback = ast.Call(node.func, [ast.Name("_ln", ast.Load())], [])
            return ast.IfExp(
                test=ast.Compare(ast.NamedExpr(ast.Name("_ln", ast.Store()), arg),
                                 [ast.Lt()], [ast.Constant(SMALL_LENGTHS)]),
                body=ast.Subscript(ast.Name(table, ast.Load()), ast.Name("_ln", ast.Load()),
                                   ast.Load()),
                orelse=fallback)

    fn.body = [Rewrite().visit(st) for st in fn.body]
    ast.fix_missing_locations(fn)
    return done
