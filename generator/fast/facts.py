"""Facts the optimistic twins prove from the decoder itself, and the work they make moot.

Rewrites of a twin (``optimist``), each sound whatever the input (a twin may stop
anywhere with an exception, or return a ``pos`` past ``end``: the checked decoder
then re-runs):

- fields from locals: ``y = obj.a`` after ``obj = _new(C)`` and ``obj.a = x`` in the
  same block (``x`` not stored again in between) reads ``x``: a local load instead of
  an attribute load, and ``y`` becomes a copy that ``propagate_copies`` removes;
- lower bounds: ``if not x >= c: raise`` (an assert, a ``valid`` range) or ``if x < c:
  raise`` bounds a name assigned once for the statements after it (and in their
  bodies); with unsigned fields (>= 0) and arithmetic on them, a size test ``n < 0``
  that cannot hold goes;
- lean errors: where a twin's error is caught, the checked decoder re-runs and raises
  the authoritative one (offset, path, expected and found); the twin's own keeps its
  class and message only, and the offsets kept for the rest become dead stores;
- proven section ends: a section's size check that a symbolic run of the path shows
  to hold (its size from fields, an ``==`` assert tying them) goes, with the padding
  before it (``proven_section_ends``);
- sections without moving ``end``: a switch's restart needs no saved position, and the
  case read in line keeps its section's end in a local (``sunk_restarts``,
  ``local_section_ends``).
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


_WHERE = frozenset({"offset", "path", "expected", "found"})


def lean_errors(fn: ast.FunctionDef) -> None:
    """A twin's ``raise E(message, offset=..., path=..., ...)`` keeps its class and
    message and drops where and what (see the module)."""
    for n in walk(fn):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call):
            n.exc.keywords = [k for k in n.exc.keywords if k.arg not in _WHERE]


# -- section ends proven from the fields ---------------------------------------------
# A linear form: {atom: coefficient}, the constant under key 1. An atom is a name not
# stored on the path, ("v", name, k) for the k-th unknown value stored to a name, or
# ("fd", form, a) for ``form // a``. ``(-x) % a`` is ``-x - a * (-x // a)``, and a floor
# division is kept in one orientation (``e // a == -((-e + a - 1) // a)`` for integers),
# so that padding to ``a`` and ``(x + a - 1) // a`` blocks meet as one atom.
Form = dict


def _add(f: Form, g: Form, k: int = 1) -> Form:
    out = dict(f)
    for key, v in g.items():
        out[key] = out.get(key, 0) + k * v
        if out[key] == 0:
            del out[key]
    return out


def _key(f: Form) -> tuple:
    return tuple(sorted(f.items(), key=repr))


def _floordiv(f: Form, a: int) -> Form:
    terms = sorted((k for k in f if k != 1), key=repr)
    if terms and f[terms[0]] < 0:  # canonical orientation: first term positive
        g = _add({k: -v for k, v in f.items()}, {1: a - 1})
        return {("fd", _key(g), a): -1}
    return {("fd", _key(f), a): 1}


class _Sym:
    """Symbolic run of one path: the integer locals as linear forms."""

    def __init__(self) -> None:
        self.env: dict[str, Form] = {}
        self.fresh = 0
        self.equal: list[Form] = []  # forms known to be zero (equality guards passed)

    def unknown(self, name: str) -> None:
        self.fresh += 1
        self.env[name] = {("v", name, self.fresh): 1}

    def form(self, e: ast.expr) -> Form | None:
        if isinstance(e, ast.Constant):
            if type(e.value) is not int:
                return None
            return {1: e.value} if e.value else {}
        if isinstance(e, ast.Name):
            return self.env.get(e.id, {e.id: 1})
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            f = self.form(e.operand)
            return None if f is None else {k: -v for k, v in f.items()}
        if not isinstance(e, ast.BinOp):
            return None
        a, b = self.form(e.left), self.form(e.right)
        if a is None or b is None:
            return None
        if isinstance(e.op, ast.Add):
            return _add(a, b)
        if isinstance(e.op, ast.Sub):
            return _add(a, b, -1)
        if isinstance(e.op, ast.Mult):
            for x, y in ((a, b), (b, a)):
                if set(y) <= {1}:
                    c = y.get(1, 0)
                    return {k: v * c for k, v in x.items()} if c else {}
            return None
        if set(b) == {1} and b[1] > 0 and isinstance(e.op, (ast.FloorDiv, ast.Mod)):
            d = _floordiv(a, b[1])
            return d if isinstance(e.op, ast.FloorDiv) else _add(a, d, -b[1])
        return None

    def same(self, f: Form, g: Form) -> bool:
        d = _add(f, g, -1)
        if not d:
            return True
        for z in self.equal:  # one equality guard, scaled
            for k, v in z.items():
                if k in d and d[k] % v == 0:
                    if not _add(d, z, -(d[k] // v)):
                        return True
                    break
        return False

    def run(self, st: ast.stmt) -> None:
        """The effect of ``st`` (not a guard) on the forms."""
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            f = self.form(st.value)
            if f is None:
                self.unknown(st.targets[0].id)
            else:
                self.env[st.targets[0].id] = f
            return
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name) \
                and isinstance(st.op, (ast.Add, ast.Sub)):
            f = self.form(ast.BinOp(ast.Name(st.target.id, ast.Load()), st.op, st.value))
            if f is not None:
                self.env[st.target.id] = f
                return
        for name in sorted({n.id for n in walk(st) if isinstance(n, ast.Name)
                            and not isinstance(n.ctx, ast.Load)}):
            self.unknown(name)
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
            self.unknown(st.target.id)


def _equality(test: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """``(a, b)`` when a guard raising on ``test`` lets only ``a == b`` through."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        c, op = test.operand, ast.Eq
    else:
        c, op = test, ast.NotEq
    if isinstance(c, ast.Compare) and len(c.ops) == 1 and isinstance(c.ops[0], op):
        return c.left, c.comparators[0]
    return None


def _is_end_check(st: ast.stmt) -> bool:
    """``if pos != end: raise`` (a section's size mismatch)."""
    if not (isinstance(st, ast.If) and not st.orelse and raises(st.body)):
        return False
    t = st.test
    return isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.NotEq) \
        and is_name(t.left, "pos") and is_name(t.comparators[0], "end")


def proven_section_ends(fn: ast.FunctionDef) -> None:
    """A section's ``if pos != end: raise`` that every path to it satisfies goes, and a
    padding to ``end`` just before it (``x = -(pos - m) % a``, ``pos += x``) becomes
    ``pos = end``: both proven from the fields already read (the sizes, the asserts and
    the ``==`` guards passed on the way), by a symbolic run of the function's paths."""
    loads: dict[str, int] = {}
    for n in walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads[n.id] = loads.get(n.id, 0) + 1

    def block(stmts: list[ast.stmt], sym: _Sym) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in stmts:
            if _is_end_check(st) and sym.same(sym.env.get("pos", {"pos": 1}),
                                              sym.env.get("end", {"end": 1})):
                _pad_to_end(out, loads)
                continue
            if isinstance(st, ast.If) and not st.orelse and raises(st.body):
                eq = _equality(st.test)
                if eq is not None:
                    a, b = sym.form(eq[0]), sym.form(eq[1])
                    if a is not None and b is not None:
                        sym.equal.append(_add(a, b, -1))
                out.append(st)
                continue
            if isinstance(st, ast.If):
                for attr in ("body", "orelse"):
                    branch = _Sym()
                    branch.env, branch.fresh = dict(sym.env), sym.fresh
                    branch.equal = list(sym.equal)
                    setattr(st, attr, block(getattr(st, attr), branch) or
                            ([ast.Pass()] if attr == "body" else []))
                    sym.fresh = max(sym.fresh, branch.fresh)
            sym.run(st)  # an if's stores: unknown after it (either branch ran)
            out.append(st)
        return out

    fn.body = block(fn.body, _Sym())


def _pad_to_end(out: list[ast.stmt], loads: dict[str, int]) -> None:
    """``x = -(pos - m) % a`` / ``pos += x`` ending ``out`` (objects built after them
    aside) -> ``pos = end``, when ``x`` is read nowhere else (the check just proved that
    the padding ends at ``end``)."""
    j = len(out) - 1
    while j >= 0 and not any(isinstance(n, ast.Name) and n.id in ("pos", "end")
                             for n in walk(out[j])):
        j -= 1  # statements that neither read nor move pos or end
    if j < 1:
        return
    inc, pad = out[j], out[j - 1]
    if isinstance(inc, ast.AugAssign) and is_name(inc.target, "pos") \
            and isinstance(inc.op, ast.Add) and isinstance(inc.value, ast.Name) \
            and isinstance(pad, ast.Assign) and len(pad.targets) == 1 \
            and is_name(pad.targets[0], inc.value.id) and isinstance(pad.value, ast.BinOp) \
            and isinstance(pad.value.op, ast.Mod):
        x = inc.value.id
        here = sum(1 for st in out[:j + 1] for n in walk(st) if is_name(n, x)
                   and isinstance(n.ctx, ast.Load))
        if loads.get(x) != here:
            return  # read elsewhere: the padding's value is wanted
        out[j - 1:j + 1] = [ast.Assign([ast.Name("pos", ast.Store())],
                                       ast.Name("end", ast.Load()), lineno=0)]
        prev = out[j - 2] if j >= 2 else None
        if isinstance(prev, ast.AugAssign) and is_name(prev.target, "pos") \
                and all(isinstance(n, (ast.Name, ast.Constant, ast.BinOp, ast.operator,
                                       ast.expr_context)) for n in walk(prev.value)):
            del out[j - 2]  # a move of pos overwritten at once (no call in it)


# -- sections without moving ``end`` ----------------------------------------------------

def _names(node: ast.AST, stored: bool) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) is not stored}


def _is_restore(st: ast.stmt, rp: str, re_: str) -> bool:
    """``pos, end = (rp, re_)``: a switch case read out of line starts over."""
    return isinstance(st, ast.Assign) and len(st.targets) == 1 \
        and isinstance(st.targets[0], ast.Tuple) and isinstance(st.value, ast.Tuple) \
        and [ast.dump(e) for e in st.targets[0].elts] == [
            ast.dump(ast.Name("pos", ast.Store())), ast.dump(ast.Name("end", ast.Store()))] \
        and len(st.value.elts) == 2 and is_name(st.value.elts[0], rp) \
        and is_name(st.value.elts[1], re_)


def sunk_restarts(fn: ast.FunctionDef) -> None:
    """``rp, re = (pos, end)`` kept for a switch's other cases, which start over with
    ``pos, end = (rp, re)``: where ``pos`` only moved by constants since and ``end`` was
    only narrowed by a section (its outer value kept in a local), the save goes and a
    restart becomes ``pos -= c`` (and ``end = <outer>``): nothing kept on the case read
    in line."""
    loads: dict[str, int] = {}
    count: dict[str, int] = {}
    for n in walk(fn):
        if isinstance(n, ast.Name):
            d = loads if isinstance(n.ctx, ast.Load) else count
            d[n.id] = d.get(n.id, 0) + 1
    for _parent, _attr, stmts in list(stmt_lists(fn)):
        for s, st in enumerate(stmts):
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1
                    and isinstance(st.targets[0], ast.Tuple) and isinstance(st.value, ast.Tuple)
                    and len(st.value.elts) == 2 and is_name(st.value.elts[0], "pos")
                    and is_name(st.value.elts[1], "end")
                    and all(isinstance(e, ast.Name) for e in st.targets[0].elts)):
                continue
            rp, re_ = (e.id for e in st.targets[0].elts)
            if count.get(rp) != 1 or count.get(re_) != 1:
                continue
            _sink(stmts, s, rp, re_, loads, count)


def _sink(stmts: list[ast.stmt], s: int, rp: str, re_: str, loads: dict[str, int],
          count: dict[str, int]) -> None:
    c, outer = 0, None
    for k in range(s + 1, len(stmts)):
        st = stmts[k]
        if isinstance(st, ast.AugAssign) and is_name(st.target, "pos") \
                and isinstance(st.value, ast.Constant) and type(st.value.value) is int:
            c += st.value.value
            continue
        if isinstance(st, ast.If) and _names(st.test, True) == set() \
                and ({rp, re_} & _names(st, False)):
            restores = []
            for attr in ("body", "orelse"):
                branch = getattr(st, attr)
                for i, b in enumerate(branch):
                    if _is_restore(b, rp, re_):
                        if any({"pos", "end"} & _names(x, True) for x in branch[:i]):
                            return  # moved again before the restart
                        restores.append((branch, i))
                        break
            if len(restores) != loads.get(rp) or len(restores) != loads.get(re_):
                return
            for branch, i in restores:
                new: list[ast.stmt] = []
                if c:
                    new.append(ast.AugAssign(ast.Name("pos", ast.Store()), ast.Sub(),
                                             ast.Constant(c), lineno=0))
                if outer is not None:
                    new.append(ast.Assign([ast.Name("end", ast.Store())],
                                          ast.Name(outer, ast.Load()), lineno=0))
                branch[i:i + 1] = new or [ast.Pass()]
            del stmts[s]
            return
        if {rp, re_} & _names(st, False):
            return
        got = _names(st, True)
        if "end" in got:  # a section narrows end: its outer value was just kept
            prev = stmts[k - 1]
            if not (outer is None and isinstance(st, ast.Assign) and len(st.targets) == 1
                    and is_name(st.targets[0], "end") and isinstance(prev, ast.Assign)
                    and len(prev.targets) == 1 and isinstance(prev.targets[0], ast.Name)
                    and is_name(prev.value, "end") and count.get(prev.targets[0].id) == 1):
                return
            outer = prev.targets[0].id
        elif "pos" in got:
            return


def local_section_ends(fn: ast.FunctionDef) -> None:
    """``o = end; end = e; if t: A else: B`` where ``A`` reads ``end`` only in ``pos =
    end`` before its ``end = o``: ``A`` keeps the section's end in a local (``s = e``,
    ``pos = s``) instead of narrowing ``end`` and putting it back; ``B`` narrows as
    before. Two stores and loads less on the case read in line."""
    count: dict[str, int] = {}
    for n in walk(fn):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            count[n.id] = count.get(n.id, 0) + 1
    for _parent, _attr, stmts in list(stmt_lists(fn)):
        k = 0
        while k + 2 < len(stmts):
            keep, narrow, sw = stmts[k], stmts[k + 1], stmts[k + 2]
            k += 1
            if not (isinstance(keep, ast.Assign) and len(keep.targets) == 1
                    and isinstance(keep.targets[0], ast.Name) and is_name(keep.value, "end")
                    and count.get(keep.targets[0].id) == 1
                    and isinstance(narrow, ast.Assign) and len(narrow.targets) == 1
                    and is_name(narrow.targets[0], "end") and isinstance(sw, ast.If)
                    and not ({"pos", "end"} & _names(sw.test, True))
                    and not any(isinstance(n, ast.NamedExpr) for n in walk(sw.test))):
                continue
            o = keep.targets[0].id
            body = sw.body
            back = next((i for i, b in enumerate(body) if isinstance(b, ast.Assign)
                         and len(b.targets) == 1 and is_name(b.targets[0], "end")
                         and is_name(b.value, o)), None)
            if back is None:
                continue
            uses = [i for i, b in enumerate(body[:back]) if "end" in _names(b, False)
                    or "end" in _names(b, True)]
            if not all(isinstance(body[i], ast.Assign) and len(body[i].targets) == 1
                       and is_name(body[i].targets[0], "pos") and is_name(body[i].value, "end")
                       for i in uses):
                continue
            if o in _names(ast.Module(body=body[back + 1:], type_ignores=[]), False):
                continue  # the outer end is read again after: leave it
            s = o.replace("_outer_end_", "_sec_end_") if "_outer_end_" in o else o + "_sec"
            if s in count:
                continue
            for i in uses:
                body[i].value = ast.Name(s, ast.Load())
            del body[back]
            body.insert(0, ast.Assign([ast.Name(s, ast.Store())], narrow.value, lineno=0))
            sw.orelse = [keep, narrow] + sw.orelse
            del stmts[k - 1:k + 1]
            k -= 1
            fit = stmts[k - 1] if k >= 1 else None  # (the switch is at k now)
            if _fits(fit, narrow.value) and not any(
                    isinstance(n, (ast.For, ast.While, ast.comprehension)) for b in body
                    for n in walk(b)):
                # the case read in line ends at the section's end, which a final
                # ``pos > end`` tests (reads past the buffer are short, or raise): the
                # section's own size test stays with the other cases only
                sw.orelse.insert(0, fit)
                del stmts[k - 1]
                k -= 1


def _fits(st: ast.stmt | None, sec_end: ast.expr) -> bool:
    """``if <sec_end> > end: raise`` (a section's size test; ``sec_end`` is ``pos + n``)."""
    return isinstance(st, ast.If) and not st.orelse and raises(st.body) \
        and isinstance(st.test, ast.Compare) and len(st.test.ops) == 1 \
        and isinstance(st.test.ops[0], ast.Gt) and is_name(st.test.comparators[0], "end") \
        and ast.dump(st.test.left) == ast.dump(sec_end)
