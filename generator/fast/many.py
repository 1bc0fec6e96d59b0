"""Many-record encoders: ``_em_<record>(values, *params)``, the encoder's body in a loop.

The body runs once per value with no call per record; its writes are fused
(``pack_fusion``), a trailing checksum slices only the record, and the pieces are
gathered in a list joined a chunk at a time instead of growing a bytearray.
"""

from __future__ import annotations

import ast
import copy
import re

from .. import ir
from .astwalk import is_name as _is_name
from .astwalk import stmt_lists as _stmt_lists
from .astwalk import walk
from .pack_fusion import (
    SMALL_LENGTHS,
    _is_out_append,
    drop_len_marks,
    fuse_packs,
    small_length_packs,
    static_padding,
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

class ManyEncoders:
    """The many-record twin of each encoder."""

    ENCODE_CHUNK = 512  # a many-encoder joins its listed pieces when this many are listed

    def encoder_many(self, rec: ir.Record, lines: list[str]) -> list[str]:
        """``_em_<record>(values, *params)``: the encoder's body once per value in one
        loop (no call, no argument tuple per record). It raises whatever the body
        raises; ``encode_many_<record>`` then re-runs the per-record loop, which names
        the failing item exactly as before."""
        if len(lines) > self.OPTIMISTIC_MAX_LINES or not self.read_in_runs(rec.name):
            return []
        fn = ast.parse("\n".join(lines)).body[0]
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
        fuse_packs(fn.body, formats, lambda fmt: self.const("S", f"struct.Struct({fmt!r})"))
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
