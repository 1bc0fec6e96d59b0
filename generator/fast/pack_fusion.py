"""Pack fusion for the many-record encoders: lengths known ahead, one pack per run.

Padding is computed from the lengths written since its mark (no ``len(out)``), adjacent
fixed writes become one ``pack`` (moved into a switch's cases where that fuses them
too), and short length prefixes come from a prebuilt table instead of a ``pack`` call.
"""

from __future__ import annotations

import ast
import copy
import struct

from .astwalk import UNSIGNED_CODES as _UNSIGNED_CODES
from .astwalk import is_name as _is_name
from .astwalk import stmt_lists as _stmt_lists
from .astwalk import walk


def _is_out_append(st: ast.stmt) -> bool:
    return isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) \
        and _is_name(st.target, "out")


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
    return done  # (no line numbers set: the emitter only unparses these trees)
