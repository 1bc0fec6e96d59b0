"""Optimistic decoding: a checked decoder rewritten into its unchecked twin.

A record's checked decoder tests the bounds before every read. Its optimistic twin
(``_u_<record>``, and ``_m_<record>`` for a whole log in one loop) leaves out the tests
that the buffer itself or one final ``pos <= end`` makes redundant: a read past the
buffer raises (IndexError, struct.error), a slice past ``end`` is short but advances
``pos`` past ``end`` all the same, and ``pos`` only grows (a statement that could move
it back is preceded by an overrun test). Any exception, or a final ``pos > end``,
re-runs the checked decoder from the record's start: it raises the authoritative
error (same type, offset and path) or returns the same value. Every other check
(enums, constants, reserved bytes, checksums, counts, zero-size items) stays.

After the tests go, copies and stores left without a reader are dropped and a switch
compares its tag before the enum conversion. What the fields themselves prove (sizes
that cannot be negative, section ends that asserts fix, switch restarts and section
ends kept without moving ``end``) is dropped as well (``facts``).
"""

from __future__ import annotations

import ast

from .. import emit_fast_encode as efe
from .astwalk import UNSIGNED_CODES as _UNSIGNED_CODES
from .astwalk import is_name as _is_name
from .astwalk import raises as _raises
from .astwalk import stmt_lists as _stmt_lists
from .astwalk import stores as _stores
from .astwalk import walk
from .facts import (
    fields_from_locals,
    flatten_tries,
    guard_bound,
    lean_errors,
    local_section_ends,
    lower_bound,
    proven_section_ends,
    sign_test,
    single_stores,
    sunk_restarts,
)

_HELPERS = frozenset({"_out", "_append", "_rs", "_p0"})
_NESTED = (ast.Lambda, ast.FunctionDef, ast.Yield, ast.Global, ast.Nonlocal)

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

    def nonneg_both(self, fn: ast.FunctionDef,
                    nodes: list[ast.AST] | None = None) -> tuple[set[str], set[str]]:
        """:meth:`nonneg` with and without the guards, from one walk of ``fn`` (or its
        ``nodes``, walked already)."""
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
        other = {n.id for n in (walk(fn) if nodes is None else nodes)
                 if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
                 and id(n) not in seen}
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
    def eligible(self, fn: ast.FunctionDef, nodes: list[ast.AST] | None = None) -> bool:
        """Whether the twin can mirror ``fn``; ``nodes``: ``fn`` walked, if at hand."""
        nodes = list(walk(fn)) if nodes is None else nodes
        returns = []
        for n in nodes:
            c = n.__class__  # (node classes are never subclassed)
            if c is ast.Name:
                if n.id in _HELPERS:
                    return False
                if n.id == "mv" and n.ctx.__class__ is not ast.Load:
                    return False  # decompressed sections swap the buffer
            elif c is ast.Try:
                if not all(_raises(h.body) for h in n.handlers):
                    return False  # a handler that keeps going (stop-on-error lists)
                if n.orelse or n.finalbody:
                    return False
            elif c is ast.Return:
                returns.append(n)
            elif c in _NESTED and n is not fn:
                return False
        last = fn.body[-1]
        return returns == [last] and isinstance(last.value, ast.Tuple) \
            and len(last.value.elts) == 2 and _is_name(last.value.elts[1], "pos")

    def transform(self, fn: ast.FunctionDef, nodes: list[ast.AST] | None = None) -> None:
        """Rewrite ``fn`` (a checked decoder) in place into its optimistic twin;
        ``nodes``: ``fn`` walked, if at hand."""
        flatten_tries(fn)  # error wrappers: the checked re-run has them
        fields_from_locals(fn)  # before the proofs: a field read from a local is proven too
        # the sign tests themselves may only go where no sign test is the proof
        # (``unsigned``: proven without them)
        ok, unsigned = self.nonneg_both(fn, nodes)  # (loads changed only)
        once = single_stores(fn)

        def proven(e: ast.expr) -> bool:
            return self.expr_nonneg(e, unsigned)

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
            if self.expr_nonneg(t.left.right, ok):
                return True
            low = lower_bound(t.left.right, facts, proven)
            return low is not None and low >= 0

        facts: dict[str, int] = {}  # name -> least value, where the statement is

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
            nonlocal facts
            outer = facts
            facts = dict(outer)  # a bound holds after its guard, in this block and below
            try:
                return rewrite_block(stmts)
            finally:
                facts = outer

        def impossible_sign(stmts: list[ast.stmt], i: int) -> bool:
            """``if x < 0: raise`` where ``x`` cannot be negative: every store of ``x`` is
            unsigned, or the store just before is bounded below by 0."""
            x = sign_test(stmts[i])
            if x is None:
                return False
            if x in unsigned:
                return True
            prev = stmts[i - 1] if i else None
            if isinstance(prev, ast.Assign) and len(prev.targets) == 1 \
                    and _is_name(prev.targets[0], x):
                low = lower_bound(prev.value, facts, proven)
                return low is not None and low >= 0
            return False

        def rewrite_block(stmts: list[ast.stmt]) -> list[ast.stmt]:
            out: list[ast.stmt] = []
            stored: set[str] = set()  # names this block stored before the statement
            i = 0
            while i < len(stmts):
                st = stmts[i]
                nxt = stmts[i + 1] if i + 1 < len(stmts) else None
                if bound_check(st, nxt) or impossible_sign(stmts, i):
                    i += 1
                    continue
                bound = guard_bound(st, once)
                if bound is not None and bound[0] in stored:  # the guard tests this store
                    facts[bound[0]] = max(facts.get(bound[0], bound[1]), bound[1])
                stored |= _stores(st)
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
                    out += rewrite_block(st.body)  # error wrappers: the checked re-run has them
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
        proven_section_ends(fn)
        lean_errors(fn)
        drop_dead_stores(fn)
        propagate_copies(fn)
        # (after the clean-up: error arguments and offset marks no longer in the way)
        sunk_restarts(fn)
        local_section_ends(fn)

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
