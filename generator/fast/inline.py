"""Switch and sub-record inlining: a small callee's body runs in its caller.

A sub-record's decoder (or encoder) is rewritten to run at its call site: its locals
renamed apart, its parameters bound to the call's arguments, its final return turned
into a store. One Python call and frame less per sub-record, the hot cost of nested
formats. A decoder too large to inline is cut to its first switch case, the other cases
calling the whole decoder. Records of plain fixed fields are inlined as one run.
"""

from __future__ import annotations

import ast
import re
from typing import Self

from .. import emit_fast_encode as efe
from .. import ir
from .astwalk import is_name as _is_name
from .astwalk import raises as _raises
from .astwalk import walk
from .base import Item, Spans, _encode_call


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

class Inlining:
    """Inlining sub-records (and a switch's first case) into their callers."""

    INLINE_MAX_LINES = 160  # a callee body longer than this stays a call (code size)

    def _sub_emitter(self, name: str) -> Self:
        """A fresh emitter (per-record state is not clobbered) sharing the constants."""
        sub = self.sub_emitter()
        sub._inline_stack = self._inline_stack | {name}
        return sub

    def inline_call(self, kind: str, callee: ir.Record, args: str, target: str) -> list[str] | None:
        """The body of ``_d_``/``_e_<callee>`` (``kind`` "d"/"e") rewritten to run in the
        caller: its locals renamed apart, its parameters bound to the call's arguments,
        its final ``return value, pos`` turned into ``target = value``. One Python call
        less per sub-record; the error paths are the caller's try/prefix as for a call.
        None when the callee is recursive, versioned, parameter-assigning or large."""
        name = callee.name
        if name in self._inline_stack or callee.version_from or len(callee.layouts) != 1 \
                or self.INLINE_MAX_LINES <= 0:
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
