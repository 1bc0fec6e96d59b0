"""Many-record encoders: ``_em_<record>(values, *params)``, the encoder's body in a loop.

The body runs once per value with no call per record (a sub-record too large to inline
is inlined for its first case, the others call it); its writes are fused
(``pack_fusion``), a trailing checksum slices only the record, and the pieces are
gathered in a list joined a chunk at a time instead of growing a bytearray (a
sub-record's call writing into a fresh buffer where its bytes do not depend on where
it starts).
"""

from __future__ import annotations

import ast
import copy
import re

from .. import ir
from .astwalk import is_name as _is_name
from .astwalk import stmt_lists as _stmt_lists
from .astwalk import stores, walk
from .pack_fusion import (
    SMALL_LENGTHS,
    _is_out_append,
    _pure,
    drop_len_marks,
    fuse_packs,
    padding_tables,
    reuse_reads,
    small_length_packs,
    static_padding,
    tag_implied_lengths,
    zero_pads,
)


def loop_checksums(fn: ast.FunctionDef) -> None:
    """In the many-record encode loop a trailing checksum always slices the buffer
    (``memoryview(out)[s:]``: the whole-buffer shortcut only pays for one record), and
    a checksum kept in a local only to be packed next is packed directly."""
    def sliced(node: ast.IfExp) -> ast.expr | None:
        """``out if <_s_x is at the start> else memoryview(out)[_s_x:]``: the slice."""
        t = node.test
        if _is_name(node.body, "out") and isinstance(t, ast.Compare) \
                and isinstance(t.left, ast.Name) and t.left.id.startswith("_s_") \
                and isinstance(node.orelse, ast.Subscript) \
                and isinstance(node.orelse.slice, ast.Slice) \
                and _is_name(node.orelse.slice.lower, t.left.id) \
                and node.orelse.slice.upper is None:
            return node.orelse
        return None

    # children before parents (a breadth-first list backwards), each replaced in its
    # parent: what a bottom-up transformer does, in one walk
    for parent in reversed(list(walk(fn))):
        for field in parent._fields:
            v = getattr(parent, field, None)
            if v.__class__ is list:
                for i, x in enumerate(v):
                    if x.__class__ is ast.IfExp and (new := sliced(x)) is not None:
                        v[i] = new
            elif v.__class__ is ast.IfExp and (new := sliced(v)) is not None:
                setattr(parent, field, new)
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
    walked = [list(walk(st)) for st in body]  # each statement's nodes, for every check below
    at = next((i for i, nodes in enumerate(walked)
               if any(_is_name(n, "out") for n in nodes)), None)
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
    for nodes in walked:
        for n in nodes:
            if isinstance(n, ast.AugAssign) and _is_name(n.target, "out"):
                if not isinstance(n.op, ast.Add):
                    return False
                allowed.add(id(n.target))
                pieces += 1
    if pieces - (mark is not None) < GATHER_MIN_PIECES:
        return False
    for nodes in walked:
        for n in nodes:
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
    return True  # (no line numbers set: the emitter only unparses these trees)

def _hot_switch(fn: ast.FunctionDef) -> tuple[int, int] | None:
    """``(i, k)``: the encoder's top-level switch ``fn.body[k]`` (``if _tag == C: ...
    else ...``) and the ``_tag = <reads of the value>`` it tests, ``fn.body[i]``; the
    tag's expression reads nothing the statements between them store. None if none."""
    for k, st in enumerate(fn.body):
        if not (isinstance(st, ast.If) and st.orelse and isinstance(st.test, ast.Compare)
                and isinstance(st.test.left, ast.Name)
                and [type(o) for o in st.test.ops] == [ast.Eq]
                and isinstance(st.test.comparators[0], ast.Constant)):
            continue
        tag = st.test.left.id
        for i in range(k - 1, -1, -1):
            a = fn.body[i]
            if isinstance(a, ast.Assign) and len(a.targets) == 1 \
                    and _is_name(a.targets[0], tag):
                reads = {n.id for n in walk(a.value) if isinstance(n, ast.Name)}
                between = set().union(*(stores(s) for s in fn.body[i + 1:k]), set())
                if _pure(a.value) and not (reads | {tag}) & between \
                        and not any(_is_name(n, "out") for n in walk(a.value)):
                    return i, k
                return None
        return None
    return None


def _relative(fn: ast.FunctionDef) -> set[str] | None:
    """The records whose encoders ``fn`` hands ``out`` to, if ``fn`` itself uses the
    buffer only relative to the record: to append, to take marks (``S = len(out)``,
    ``S + k``, names computed from marks) and to use them only as differences
    (``len(out) - S``, ``E - S``), slices and patch positions of ``out``, and equality
    with one another or ``len(out)``; a whole-buffer shortcut ``out if S == 0 ...`` is
    the same bytes either way. None when it asks for an absolute position (aligning to
    the buffer's start, writing a mark's value) or gives ``out`` to anything else."""
    parent: dict[int, ast.AST] = {}
    for n in walk(fn):
        for c in ast.iter_child_nodes(n):
            parent[id(c)] = n

    def is_len_out(e: ast.AST) -> bool:
        return isinstance(e, ast.Call) and _is_name(e.func, "len") and len(e.args) == 1 \
            and _is_name(e.args[0], "out")

    def stripped(e: ast.AST) -> ast.AST:
        while isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) \
                and isinstance(e.right, ast.Constant):
            e = e.left
        return e

    marks: set[str] = set()
    changed = True
    while changed:  # positions: ``len(out)`` or another mark, plus constants
        changed = False
        for n in walk(fn):
            if isinstance(n, ast.Assign) and (
                    is_len_out(v := stripped(n.value)) or isinstance(v, ast.Name) and v.id in marks):
                for t in n.targets:
                    if isinstance(t, ast.Name) and t.id not in marks:
                        marks.add(t.id)
                        changed = True

    def absolute(e: ast.AST) -> bool:
        return is_len_out(e) or isinstance(e, ast.Name) and e.id in marks

    def of_out(e: ast.AST | None) -> bool:
        """``out[...]`` or ``memoryview(out)[...]``."""
        if not isinstance(e, ast.Subscript):
            return False
        v = e.value
        return _is_name(v, "out") or isinstance(v, ast.Call) and _is_name(v.func, "memoryview") \
            and len(v.args) == 1 and _is_name(v.args[0], "out")

    def context(e: ast.AST) -> tuple[ast.AST, ast.AST | None]:
        """Where a position ends up, through ``+ k`` (a constant): (the sum, its parent)."""
        up = parent.get(id(e))
        while isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add) \
                and isinstance(up.right, ast.Constant) and up.left is e:
            e, up = up, parent.get(id(up))
        return e, up

    def fine_position(e0: ast.AST) -> bool:
        e, up = context(e0)
        if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Sub) \
                and absolute(stripped(up.left)) and absolute(stripped(up.right)):
            return True  # a difference of two positions
        if isinstance(up, ast.Slice) and of_out(parent.get(id(up))):
            return True
        if isinstance(up, ast.Subscript) and up.slice is e and of_out(up):
            return True
        if isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) \
                and up.func.attr == "pack_into" and len(up.args) >= 2 \
                and _is_name(up.args[0], "out") and up.args[1] is e:
            return True  # a patch there
        if isinstance(up, ast.Assign) and up.value is e and all(
                isinstance(t, ast.Name) and t.id in marks for t in up.targets):
            return True  # another mark
        if isinstance(up, ast.Compare) and all(isinstance(o, ast.Eq | ast.NotEq) for o in up.ops):
            operands = [up.left, *up.comparators]
            if all(absolute(stripped(x)) for x in operands):
                return True
            # ``S == 0`` in ``out if S == 0 ... else memoryview(out)[S:...]``
            test = parent.get(id(up))
            test = parent.get(id(test)) if isinstance(test, ast.BoolOp) else test
            if isinstance(test, ast.IfExp) and _is_name(test.body, "out") \
                    and of_out(test.orelse) and any(isinstance(x, ast.Constant) and x.value == 0
                                                    for x in operands):
                return True
        return False

    calls: set[str] = set()
    for n in walk(fn):
        if _is_name(n, "out"):
            up = parent.get(id(n))
            if isinstance(up, ast.AugAssign) and up.target is n and isinstance(up.op, ast.Add):
                continue
            if isinstance(up, ast.Call) and up.args and up.args[0] is n \
                    and isinstance(up.func, ast.Name) and up.func.id.startswith("_e_"):
                calls.add(up.func.id[3:])
                continue
            if is_len_out(up) and fine_position(up):
                continue
            if isinstance(up, ast.Call) and _is_name(up.func, "memoryview") \
                    and of_out(parent.get(id(up))):
                continue
            if of_out(up) or isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) \
                    and up.func.attr == "pack_into" and up.args and up.args[0] is n:
                continue  # its positions are checked as the marks' uses below
            if isinstance(up, ast.IfExp) and up.body is n \
                    and of_out(up.orelse) and _whole_buffer_test(up.test, marks):
                continue
            return None
        elif isinstance(n, ast.Name) and n.id in marks and isinstance(n.ctx, ast.Load):
            if not fine_position(n):
                return None
    # slices and patches of ``out`` must be at marks, not at constants of the buffer
    for n in walk(fn):
        if of_out(n) and parent.get(id(n)) is not None:
            sl = n.slice  # type: ignore[attr-defined]
            bounds = [sl.lower, sl.upper] if isinstance(sl, ast.Slice) else [sl]
            if not any(b is not None and any(absolute(x) for x in walk(b)) for b in bounds):
                return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "pack_into" and n.args and _is_name(n.args[0], "out") \
                and not (len(n.args) >= 2 and any(absolute(x) for x in walk(n.args[1]))):
            return None
    return calls


def _whole_buffer_test(test: ast.expr, marks: set[str]) -> bool:
    """``S == 0`` (or that and more, with ``and``), S a mark: the record starts the buffer."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    return any(isinstance(c, ast.Compare) and isinstance(c.left, ast.Name) and c.left.id in marks
               and [type(o) for o in c.ops] == [ast.Eq] and isinstance(c.comparators[0], ast.Constant)
               and c.comparators[0].value == 0 for c in parts)


class ManyEncoders:
    """The many-record twin of each encoder."""

    HOT_CASE_MAX_LINES = 400  # a callee's hot case (and its fields around it) inlined up to this

    def inline_hot_cases(self, fn: ast.FunctionDef, rec: ir.Record) -> int:
        """A sub-record encoder too large to inline (``_e_X(out, value)``, its many
        cases) is inlined into the many-record loop for its first case only: the tag is
        read first, and a value of that case runs the callee's fields and that case's
        writes in the loop (no call, and its fixed writes fuse with the caller's); any
        other value calls ``_e_X`` as before. The first case is the one a schema lists
        first, the common one. The many-record loop may raise anywhere a record fails
        (the per-record loop then names it), so reading the tag before the callee's
        first checks changes no result. Returns how many calls were inlined."""
        done = 0
        taken = {n.id for n in walk(fn) if isinstance(n, ast.Name)}
        for _parent, _attr, stmts in list(_stmt_lists(fn)):
            for st in list(stmts):
                call = st.value if isinstance(st, ast.Expr) else None
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                        and call.func.id.startswith("_e_") and not call.keywords
                        and len(call.args) >= 2 and _is_name(call.args[0], "out")
                        and not any(_is_name(n, "out") for a in call.args[1:]
                                    for n in walk(a))):
                    continue
                new = self._hot_case(call, rec, taken)
                if new is None:
                    continue
                at = stmts.index(st)
                stmts[at:at + 1] = new
                taken |= {n.id for s in new for n in walk(s) if isinstance(n, ast.Name)}
                done += 1
        return done

    def relative_only(self, name: str, seen: set[str] | None = None) -> bool:
        """Whether ``_e_<name>``, and every encoder it hands ``out`` to, writes the same
        bytes into a fresh buffer as at the end of a longer one (:func:`_relative`)."""
        seen = set() if seen is None else seen
        if name in seen:
            return True
        seen.add(name)
        callee = self.family.records.get(name)
        if callee is None or len(callee.layouts) != 1 or callee.version_from:
            return False
        sub = self._sub_emitter(name)
        cfn = ast.parse("\n".join(sub.built_once("e", callee, callee.layouts[0],
                                                 sub.checked_encoder))).body[0]
        calls = _relative(cfn)
        return calls is not None and all(self.relative_only(c, seen) for c in calls)

    def cold_calls_apart(self, fn: ast.FunctionDef) -> int:
        """``_e_X(out, ...)`` (a call left in the loop, e.g. a case other than the one
        inlined) becomes ``_cold = bytearray()``, ``_e_X(_cold, ...)``, ``out += _cold`` where
        ``_e_X`` writes the same bytes anywhere (:meth:`relative_only`): the record's
        other writes can then be gathered (``gather_parts``). Returns how many."""
        done = 0
        if any(_is_name(n, "_cold") for n in walk(fn)):
            return 0
        for _parent, _attr, stmts in list(_stmt_lists(fn)):
            for st in list(stmts):
                call = st.value if isinstance(st, ast.Expr) else None
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                        and call.func.id.startswith("_e_") and call.args
                        and _is_name(call.args[0], "out")
                        and self.relative_only(call.func.id[3:])):
                    continue
                call.args[0] = ast.Name("_cold", ast.Load())
                at = stmts.index(st)
                stmts[at:at + 1] = [ast.parse("_cold = bytearray()").body[0], st,
                                    ast.parse("out += _cold").body[0]]
                done += 1
        return done

    def _hot_case(self, call: ast.Call, rec: ir.Record, taken: set[str]) -> list[ast.stmt] | None:
        """The statements replacing ``call`` (see :meth:`inline_hot_cases`), or None."""
        name = call.func.id[3:]  # type: ignore[attr-defined]
        callee = self.family.records.get(name)
        if callee is None or name == rec.name or rec.name in self._reachable(name) \
                or callee.version_from or len(callee.layouts) != 1:
            return None
        sub = self._sub_emitter(name)
        src = sub.built_once("e", callee, callee.layouts[0], sub.checked_encoder)
        if len(src) > self.HOT_CASE_MAX_LINES * 8:
            return None
        cfn = ast.parse("\n".join(src)).body[0]
        params = [a.arg for a in cfn.args.args]
        if len(params) != len(call.args) or params[0] != "out" \
                or cfn.args.vararg or cfn.args.kwarg or cfn.args.kwonlyargs:
            return None
        nodes = list(walk(cfn))
        if any(isinstance(n, (ast.Return, ast.Yield, ast.Lambda, ast.Global, ast.Nonlocal,
                              ast.FunctionDef, ast.ClassDef)) and n is not cfn for n in nodes):
            return None
        found = _hot_switch(cfn)
        if found is None:
            return None
        i, k = found
        switch = cfn.body[k]
        hot = cfn.body[:i] + cfn.body[i + 1:k] + switch.body + cfn.body[k + 1:]
        if len(ast.unparse(ast.Module(body=hot, type_ignores=[])).splitlines()) \
                > self.HOT_CASE_MAX_LINES:
            return None
        px = f"_{name}__"
        locs = {n.id for n in nodes if isinstance(n, ast.Name) and n.id not in ("out",)
                and (not isinstance(n.ctx, ast.Load) or n.id in params)}
        rename = {x: px + x for x in locs}
        if set(rename.values()) & taken:
            return None
        pre: list[ast.stmt] = []
        for p, arg in zip(params[1:], call.args[1:], strict=True):
            pre.append(ast.Assign([ast.Name(rename[p], ast.Store())], arg, lineno=0))
        tag_assign = copy.deepcopy(cfn.body[i])
        test = copy.deepcopy(switch.test)
        hot = [copy.deepcopy(s) for s in hot]
        for s in [tag_assign, test, *hot]:
            for n in walk(s):
                if isinstance(n, ast.Name) and n.id in rename:
                    n.id = rename[n.id]
        cold = ast.Expr(ast.Call(ast.Name(call.func.id, ast.Load()),  # type: ignore[attr-defined]
                                 [ast.Name("out", ast.Load())]
                                 + [ast.Name(rename[p], ast.Load()) for p in params[1:]], []))
        return pre + [tag_assign, ast.If(test, hot or [ast.Pass()], [cold])]


    # a many-encoder joins its listed pieces every this many records (values are a list
    # or a tuple: ``encode_many_*`` calls it only then), the chunks once at the end
    ENCODE_CHUNK_RECORDS = 128

    def encoder_many(self, rec: ir.Record, lines: list[str]) -> list[str]:
        """``_em_<record>(values, *params)``: the encoder's body once per value in one
        loop (no call, no argument tuple per record). It raises whatever the body
        raises; ``encode_many_<record>`` then re-runs the per-record loop, which names
        the failing item exactly as before."""
        if len(lines) > self.OPTIMISTIC_MAX_LINES or not self.read_in_runs(rec.name):
            return []
        fn = ast.parse("\n".join(lines)).body[0]
        self.inline_hot_cases(fn, rec)
        nodes = list(walk(fn))
        # the passes below write no ``_ln`` of their own: asked of the body as emitted
        has_ln = any(isinstance(n, ast.Name) and n.id == "_ln" for n in nodes)
        if any(isinstance(n, (ast.Return, ast.Yield, ast.Lambda, ast.Global, ast.Nonlocal))
               or (isinstance(n, ast.FunctionDef) and n is not fn)
               or (isinstance(n, ast.Name) and n.id == "values") for n in nodes):
            return []
        formats = self.struct_formats()
        static_padding(fn.body, formats)
        drop_len_marks(fn)
        new_struct = lambda fmt: self.const("S", f"struct.Struct({fmt!r})")  # noqa: E731
        fuse_packs(fn.body, formats, new_struct)
        zero_pads(fn, formats, new_struct)
        tag_implied_lengths(fn, formats)
        padding_tables(fn, lambda a: self.const(
            "Z", f"tuple(bytes(_i) for _i in range({a}))"))
        reuse_reads(fn)
        if not has_ln:
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
        before = copy.deepcopy(fn.body)
        cold = self.cold_calls_apart(fn)
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
            # a chunk is a slice of the values: no test of the list's length per record
            head = ["    _all = []", "    _a = _all.append", "    _chunks = []"]
            loop = [f"    for _i in range(0, len(values), {self.ENCODE_CHUNK_RECORDS}):",
                    f"        for v in values[_i:_i + {self.ENCODE_CHUNK_RECORDS}]:"]
            tail = ["        _chunks.append(b''.join(_all))", "        _all.clear()",
                    "    return b''.join(_chunks)"]
            indent = "            "
        else:
            if cold:  # not gathered after all: the calls write to ``out`` as they did
                fn.body = before
            head, tail = ["    out = bytearray()"], ["    return bytes(out)"]
            loop, indent = ["    for v in values:"], "        "
        body = ast.unparse(ast.Module(body=fn.body, type_ignores=[])).splitlines()
        return ["", f"def _em_{rec.name}(values{''.join(', ' + p for p in params)}):"] \
            + head + [f"    {h}_pack = {h}.pack" for h in sorted(hoisted)] + loop \
            + [indent + x for x in body] + tail
