"""Speculative read fusion and ``bytes`` slices, for the optimistic twins.

Fixed reads at known distances on the path the first switch cases take become one
``unpack_from`` (a miss raises, and the checked decoder re-runs); copies and text out of
a ``bytes`` buffer skip the constructor call.
"""

from __future__ import annotations

import ast
import struct

from .astwalk import is_name as _is_name
from .astwalk import raises as _raises
from .astwalk import stmt_lists as _stmt_lists
from .astwalk import walk

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

    def rewrite(node: ast.Call) -> ast.expr | None:
        """The call's ``bytes`` fast form, or None to leave it."""
        nonlocal changed
        if not isinstance(node.func, ast.Name) or node.keywords \
                or not node.args or not buffer_slice(node.args[0]):
            return None
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
            return None
        changed = True
        return ast.IfExp(ast.Name("_isb", ast.Load()), fast, node)

    # each call replaced in its parent, every node visited once (the new nodes are not:
    # a rewritten call's slice is not a call, and the call stays as the other branch)
    for parent in list(walk(fn)):
        for field in parent._fields:
            v = getattr(parent, field, None)
            if v.__class__ is list:
                for i, x in enumerate(v):
                    if x.__class__ is ast.Call and (new := rewrite(x)) is not None:
                        v[i] = new
            elif v.__class__ is ast.Call and (new := rewrite(v)) is not None:
                setattr(parent, field, new)
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
