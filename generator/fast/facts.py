"""Facts the optimistic twins prove from the decoder itself, and the work they make moot.

Three rewrites of a twin (``optimist``), each sound whatever the input:

- fields from locals: ``y = obj.a`` after ``obj = _new(C)`` and ``obj.a = x`` in the
  same block (``x`` not stored again in between) reads ``x``: a local load instead of
  an attribute load, and ``y`` becomes a copy that ``propagate_copies`` removes;
- lower bounds: ``if not x >= c: raise`` (an assert, a ``valid`` range) or ``if x < c:
  raise`` bounds a name assigned once for the statements after it (and in their
  bodies); with unsigned fields (>= 0) and arithmetic on them, a size test ``n < 0``
  that cannot hold goes;
- bare misses: a twin's error is never seen (any exception re-runs the checked
  decoder, which raises the authoritative one), so each ``raise E(...)`` becomes
  ``raise IndexError``, and the offsets kept only for those messages are dead stores.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .astwalk import is_name, raises, stmt_lists, walk


def flatten_tries(fn: ast.FunctionDef) -> None:
    """Each ``try`` replaced by its body: its handlers only re-raise with the field's
    path, which the checked re-run gives (``Optimist.eligible`` refuses any other)."""
    for parent, attr, stmts in list(stmt_lists(fn)):
        if any(isinstance(st, ast.Try) for st in stmts):
            flat: list[ast.stmt] = []
            todo = list(reversed(stmts))
            while todo:
                st = todo.pop()
                if isinstance(st, ast.Try):
                    todo.extend(reversed(st.body))
                else:
                    flat.append(st)
            setattr(parent, attr, flat)


def fields_from_locals(fn: ast.FunctionDef) -> None:
    """``y = obj.a`` -> ``y = x`` where ``obj.a = x`` was stored earlier in the same block
    (``obj`` built there by ``_new``, or a copy of it), neither stored again since."""
    for _parent, _attr, stmts in stmt_lists(fn):
        known: dict[tuple[str, str], str] = {}  # (obj, attr) -> local holding the value
        built: dict[str, str] = {}  # local -> the object it holds (itself, or a copy's)
        for st in stmts:
            tgt = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else None
            if tgt is not None and isinstance(st.value, ast.Attribute) \
                    and isinstance(st.value.value, ast.Name) and st.value.value.id in built:
                src = known.get((built[st.value.value.id], st.value.attr))
                if src is not None:
                    st.value = ast.Name(src, ast.Load())
            if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) \
                    and tgt.value.id in built:
                key = (built[tgt.value.id], tgt.attr)
                if isinstance(st.value, ast.Name):
                    known[key] = st.value.id
                else:
                    known.pop(key, None)
                continue
            # any other store (nested ones included) ends what is known of its names
            gone = {n.id for n in walk(st)
                    if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            if gone:
                known = {k: v for k, v in known.items() if k[0] not in gone and v not in gone}
                built = {k: v for k, v in built.items() if k not in gone and v not in gone}
            if isinstance(tgt, ast.Name) and isinstance(st.value, ast.Call) \
                    and is_name(st.value.func, "_new"):
                built[tgt.id] = tgt.id
            elif isinstance(tgt, ast.Name) and isinstance(st.value, ast.Name) \
                    and st.value.id in built:
                built[tgt.id] = built[st.value.id]


def single_stores(fn: ast.FunctionDef) -> set[str]:
    """Names stored exactly once in ``fn`` (a bound proven at their guard stays true)."""
    count: dict[str, int] = {}
    for n in walk(fn):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            count[n.id] = count.get(n.id, 0) + 1
    for n in walk(fn):  # augmented stores count as a second store
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            count[n.target.id] = 2
    return {k for k, v in count.items() if v == 1}


def guard_bound(st: ast.stmt, once: set[str]) -> tuple[str, int] | None:
    """``(x, c)`` when ``st`` is ``if not x >= c: raise`` (``not x > c``: c + 1) or
    ``if x < c: raise`` with ``x`` stored once: after it, ``x >= c``."""
    if not (isinstance(st, ast.If) and not st.orelse and raises(st.body)):
        return None
    t = st.test
    neg = isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not)
    c = t.operand if neg else t
    if not (isinstance(c, ast.Compare) and len(c.ops) == 1 and isinstance(c.left, ast.Name)
            and c.left.id in once and isinstance(c.comparators[0], ast.Constant)
            and type(c.comparators[0].value) is int):
        return None
    k, op = c.comparators[0].value, c.ops[0]
    if neg and isinstance(op, ast.GtE):
        return c.left.id, k
    if neg and isinstance(op, ast.Gt):
        return c.left.id, k + 1
    if not neg and isinstance(op, ast.Lt):
        return c.left.id, k
    return None


def lower_bound(e: ast.expr, facts: dict[str, int],
                nonneg: Callable[[ast.expr], bool]) -> int | None:
    """A lower bound of integer expression ``e`` (None: unknown), from the ``facts``
    (name -> least value) and ``nonneg`` (an expression proven >= 0)."""
    if isinstance(e, ast.Constant):
        return e.value if type(e.value) is int else None
    if isinstance(e, ast.Name) and e.id in facts:
        return max(facts[e.id], 0 if nonneg(e) else facts[e.id])
    if isinstance(e, ast.BinOp):
        r = e.right
        if isinstance(e.op, (ast.Add, ast.Mult)):
            a, b = lower_bound(e.left, facts, nonneg), lower_bound(r, facts, nonneg)
            if a is not None and b is not None:
                if isinstance(e.op, ast.Add):
                    return a + b
                if a >= 0 and b >= 0:
                    return a * b
        elif isinstance(e.op, ast.Sub) and isinstance(r, ast.Constant) and type(r.value) is int:
            a = lower_bound(e.left, facts, nonneg)
            return None if a is None else a - r.value
        elif isinstance(e.op, ast.FloorDiv) and isinstance(r, ast.Constant) \
                and type(r.value) is int and r.value > 0:
            a = lower_bound(e.left, facts, nonneg)
            return None if a is None else a // r.value
    return 0 if nonneg(e) else None


def sign_test(st: ast.stmt) -> str | None:
    """``x`` when ``st`` is ``if x < 0: raise ...`` (a size or count that went negative)."""
    if isinstance(st, ast.If) and not st.orelse and raises(st.body):
        t = st.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Lt) \
                and isinstance(t.left, ast.Name) and isinstance(t.comparators[0], ast.Constant) \
                and t.comparators[0].value == 0:
            return t.left.id
    return None


def bare_misses(fn: ast.FunctionDef) -> None:
    """Every ``raise E(...)`` of a twin becomes ``raise IndexError`` (see the module)."""
    for n in walk(fn):
        if isinstance(n, ast.Raise) and n.exc is not None and not is_name(n.exc, "IndexError"):
            n.exc, n.cause = ast.Name("IndexError", ast.Load()), None
