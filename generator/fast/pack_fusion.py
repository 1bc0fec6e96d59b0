"""Pack fusion for the many-record encoders: lengths known ahead, one pack per run.

Padding and size checks are computed from the lengths written since their mark (no
``len(out)``), adjacent fixed writes become one ``pack`` (across checks and marks, and
moved into a switch's cases where that fuses them too), constant zero runs are the
format's pad bytes, paddings and short length prefixes come from prebuilt tables instead
of a call, and a switch tag's length check goes where no case constant implies it.
"""

from __future__ import annotations

import ast
import copy
import re
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

def _moved_mark(st: ast.stmt) -> str | None:
    """``S = len(out) + k`` (a mark a fused write moved past), or ``S = len(out)``."""
    if isinstance(st, ast.Assign) and isinstance(st.value, ast.BinOp) \
            and isinstance(st.value.op, ast.Add) and isinstance(st.value.right, ast.Constant):
        inner = ast.Assign(st.targets, st.value.left)
        return _len_mark(inner)
    return _len_mark(st)

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
    list is done), so each statement is walked once however deep it nests. A check of
    the size written since a mark (``len(out) - S``) is computed the same way."""
    for st in stmts:
        for sub in _sub_lists(st):
            _static_padding(sub, formats, seen)
    # mark -> [bytes so far, length expressions of the other pieces so far]
    track: dict[str, list | None] = {}

    def written(t: list) -> ast.expr:
        k, exprs = t
        terms: list[ast.expr] = [ast.Constant(k)] if k or not exprs else []
        terms += [copy.deepcopy(e) for e in exprs]
        total = terms[0]
        for x in terms[1:]:
            total = ast.BinOp(total, ast.Add(), x)
        return total

    for st in stmts:
        mark = _len_mark(st)
        if mark is not None:
            track[mark] = [0, []]
            continue
        if _is_out_append(st):
            pad = _padding_of(st.value)
            if pad is not None and track.get(pad[0]) is not None:
                st.value = ast.Call(ast.Name("bytes", ast.Load()), [ast.BinOp(
                    ast.UnaryOp(ast.USub(), written(track[pad[0]])),  # type: ignore[arg-type]
                    ast.Mod(), ast.Constant(pad[1]))], [])
            piece = st.value
            name = _pack_call(piece, formats)
            size = struct.calcsize(formats[name]) if name else \
                len(piece.value) if isinstance(piece, ast.Constant) \
                and isinstance(piece.value, bytes) else None
            length: ast.expr | None = None
            if isinstance(piece, ast.Name):
                length = ast.Call(ast.Name("len", ast.Load()), [ast.Name(piece.id, ast.Load())], [])
            elif isinstance(piece, ast.Call) and _is_name(piece.func, "bytes") \
                    and len(piece.args) == 1 and not piece.keywords \
                    and not any(_is_name(n, "out") for n in walk(piece.args[0])) \
                    and _pure_arith(piece.args[0]):
                length = piece.args[0]  # zeros: as many as the (int) argument says
            for m, t in track.items():
                if t is None:
                    continue
                if size is not None:
                    t[0] += size
                elif length is not None:
                    t[1].append(length)
                else:
                    track[m] = None
            continue
        if any(t is not None for t in track.values()):
            _sizes_since(st, track, written, seen)
        stores, touches = _stores_touches(st, seen)
        for m, t in track.items():
            if t is None:
                continue
            reads = {n.id for e in t[1] for n in walk(e) if isinstance(n, ast.Name)}
            if touches or m in stores or stores & reads:
                track[m] = None

def _pure_arith(e: ast.expr) -> bool:
    """Integer arithmetic on names, attributes, constants and ``len`` (no side effect)."""
    for x in walk(e):
        if isinstance(x, ast.Call):
            if not (_is_name(x.func, "len") and len(x.args) == 1 and not x.keywords):
                return False
        elif not isinstance(x, ast.Name | ast.Load | ast.Constant | ast.BinOp | ast.UnaryOp
                            | ast.Attribute | ast.operator | ast.unaryop):
            return False
    return True

def _sizes_since(st: ast.stmt, track: dict[str, list | None], written,
                 seen: dict[int, tuple[set[str], bool]]) -> None:
    """In a check (``if ...: raise``), ``len(out) - S`` for a tracked mark S becomes the
    sum of what was written since S: the check no longer asks ``out`` for its length."""
    if not (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1
            and isinstance(st.body[0], ast.Raise)):
        return
    hits = 0

    class Sizes(ast.NodeTransformer):
        def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
            nonlocal hits
            if isinstance(node.op, ast.Sub) and isinstance(node.left, ast.Call) \
                    and _is_name(node.left.func, "len") and len(node.left.args) == 1 \
                    and _is_name(node.left.args[0], "out") and isinstance(node.right, ast.Name) \
                    and track.get(node.right.id) is not None:
                hits += 1
                return written(track[node.right.id])
            return self.generic_visit(node)

    Sizes().visit(st)
    if hits:
        seen.pop(id(st), None)
        for inner in st.body:
            seen.pop(id(inner), None)

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

def _guard(st: ast.stmt) -> bool:
    """``if <test>: raise ...``: a check that writes nothing and stores nothing (its test
    reads values, does arithmetic, takes ``len``/``max``/``min`` and compares)."""
    if not (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1
            and isinstance(st.body[0], ast.Raise)):
        return False
    for n in walk(st):
        if isinstance(n, ast.Name) and (n.id == "out" or not isinstance(n.ctx, ast.Load)):
            return False
        if isinstance(n, ast.NamedExpr | ast.Await | ast.Lambda):
            return False
        if isinstance(n, ast.Call) and n is not st.body[0].exc \
                and not (isinstance(n.func, ast.Name) and n.func.id in _GUARD_CALLS):
            # the raise's own exception (a constructor) is built only when raising
            if not any(n is m for m in walk(st.body[0])):
                return False
    return True

_GUARD_CALLS = {"len", "max", "min", "str", "type", "repr", "isinstance"}

def _leads_to_pack(stmts: list[ast.stmt], formats: dict[str, str], order: str) -> bool:
    """Whether a write moved to the start of ``stmts`` would fuse: reads and checks,
    then a fixed write of the same byte order (directly, or first thing in the first
    case of a switch on those reads). A write is moved into a switch's cases only then:
    otherwise it would only be copied into each case, to no gain."""
    for st in stmts:
        if _pure_assign(st) is not None or _guard(st) or _moved_mark(st) is not None:
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
        marks: list[int] = []  # ``S = len(out)`` between the writes
        # checks between two writes may run before the first: in the many-record loop a
        # failing record raises either way (and the per-record loop names its error)
        while j < len(stmts):
            if (s := _pure_assign(stmts[j])) is not None:
                stored |= s
            elif (mk := _moved_mark(stmts[j])) is not None:
                stored.add(mk)
                marks.append(j)
            elif not _guard(stmts[j]):
                break
            j += 1
        if j >= len(stmts) or stored & reads:
            i += 1
            continue
        nxt = stmts[j]
        other = _pack_call(nxt.value, formats) if _is_out_append(nxt) else None
        if other is not None and ("out" in reads or any(
                _is_name(n, "out") for a in nxt.value.args for n in walk(a))):
            other = None  # a write of a position: packed where it stands
        if other is not None and formats[other][:1] == formats[name][:1]:
            fmt = formats[name] + formats[other][1:]
            fused = new_struct(fmt)
            formats[fused] = fmt
            nxt.value = ast.Call(ast.Attribute(ast.Name(fused, ast.Load()), "pack", ast.Load()),
                                 st.value.args + nxt.value.args, [])
            size = struct.calcsize(formats[name])
            for m in marks:  # a mark after the first write counts its bytes still
                stmts[m].value = ast.BinOp(stmts[m].value, ast.Add(), ast.Constant(size))
            del stmts[i]
            continue  # the fused write may fuse again with what follows it
        if isinstance(nxt, ast.If) and _pure(nxt.test) and nxt.body \
                and _leads_to_pack(nxt.body, formats, formats[name][:1]):
            size = struct.calcsize(formats[name])
            for m in marks:  # the write now follows these marks: they count its bytes
                stmts[m].value = ast.BinOp(stmts[m].value, ast.Add(), ast.Constant(size))
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


_ITEM = re.compile(r"(\d*)([xcbB?hHiIlLqQnNefdspP])")

def zero_pads(fn: ast.FunctionDef, formats: dict[str, str], new_struct) -> int:
    """A ``pack`` argument that is a constant run of zero bytes (reserved bytes, a
    scalar pad) packed as ``Ns`` becomes an ``Nx`` pad byte of the format: ``pack``
    writes the zeros itself, with no argument to pass and copy. ``new_struct(fmt)``
    names the ``Struct`` of the new format. Returns how many writes were rewritten."""
    done = 0
    for n in walk(fn):
        name = _pack_call(n, formats) if isinstance(n, ast.Call) else None
        fmt = formats.get(name or "", "")
        if name is None or fmt[:1] not in "<>" or not any(
                isinstance(a, ast.Constant) and isinstance(a.value, bytes)
                and a.value and not a.value.strip(b"\0") for a in n.args):
            continue
        items = _ITEM.findall(fmt[1:])
        if "".join(c + k for c, k in items) != fmt[1:]:
            continue  # (spaces or an unusual code: left as it is)
        args = list(n.args)
        out_fmt, out_args, at = [], [], 0
        for count, code in items:
            taken = 0 if code == "x" else 1 if code in "sp" else int(count or 1)
            mine = args[at:at + taken]
            at += taken
            if code == "s" and len(mine) == 1 and isinstance(mine[0], ast.Constant) \
                    and isinstance(mine[0].value, bytes) and mine[0].value \
                    and len(mine[0].value) == int(count or 1) and not mine[0].value.strip(b"\0"):
                out_fmt.append(f"{count}x")
                continue
            out_fmt.append(count + code)
            out_args += mine
        if at != len(args):
            continue
        new_fmt = fmt[0] + "".join(out_fmt)
        fused = new_struct(new_fmt)
        formats[fused] = new_fmt
        n.func = ast.Attribute(ast.Name(fused, ast.Load()), "pack", ast.Load())
        n.args = out_args
        done += 1
    return done

PAD_TABLE_MAX = 256  # paddings to a boundary of up to this many bytes come from a table

def padding_tables(fn: ast.FunctionDef, new_table) -> int:
    """``bytes(<n> % A)`` (zeros to an ``A``-byte boundary, ``A`` <= 256) becomes
    ``T[<n> % A]``, ``T`` the prebuilt tuple ``bytes(0) .. bytes(A - 1)``: an index
    instead of a call that allocates and clears a new object per record. ``<n>`` is
    integer arithmetic on lengths (an int, so the index is in range as ``bytes``'s
    argument was). ``new_table(A)`` names the tuple. Returns how many were rewritten."""
    done = 0

    def arith(e: ast.expr) -> bool:
        for x in walk(e):
            if isinstance(x, ast.Call):
                if not (_is_name(x.func, "len") and len(x.args) == 1 and not x.keywords):
                    return False
            elif isinstance(x, ast.Constant):
                if x.value.__class__ is not int:
                    return False
            elif not isinstance(x, ast.Name | ast.Load | ast.BinOp | ast.UnaryOp | ast.Add
                                | ast.Sub | ast.Mult | ast.FloorDiv | ast.Mod | ast.USub
                                | ast.Attribute):
                return False
        return True

    class Rewrite(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            nonlocal done
            self.generic_visit(node)
            if not (_is_name(node.func, "bytes") and len(node.args) == 1 and not node.keywords):
                return node
            m = node.args[0]
            if not (isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod)
                    and isinstance(m.right, ast.Constant) and m.right.value.__class__ is int
                    and 1 < m.right.value <= PAD_TABLE_MAX and arith(m.left)):
                return node
            done += 1
            return ast.Subscript(ast.Name(new_table(m.right.value), ast.Load()), m, ast.Load())

    fn.body = [Rewrite().visit(st) for st in fn.body]
    return done


def _packs_as(call: ast.Call, formats: dict[str, str], what: str, size: int) -> bool:
    """Whether pack ``call`` writes the expression ``what`` (its source) as ``{size}s``."""
    name = _pack_call(call, formats)
    fmt = formats.get(name or "", "")
    if name is None or fmt[:1] not in "<>":
        return False
    items = _ITEM.findall(fmt[1:])
    if "".join(c + k for c, k in items) != fmt[1:]:
        return False
    at = 0
    for count, code in items:
        taken = 0 if code == "x" else 1 if code in "sp" else int(count or 1)
        if code == "s" and int(count or 1) == size and at < len(call.args) \
                and ast.unparse(call.args[at]) == what:
            return True
        at += taken
    return False

def _always_packs(stmts: list[ast.stmt], formats: dict[str, str], what: str, size: int) -> bool:
    """Whether every way through ``stmts`` that does not raise writes ``what`` as
    ``{size}s`` (a write at their top level, or in both branches of an ``if``)."""
    for st in stmts:
        if _is_out_append(st) and any(isinstance(n, ast.Call) and _packs_as(n, formats, what, size)
                                      for n in walk(st.value)):
            return True
        if isinstance(st, ast.If) and st.orelse and _always_packs(st.body, formats, what, size) \
                and _always_packs(st.orelse, formats, what, size):
            return True
    return False

def _length_guard(st: ast.stmt) -> tuple[str, int] | None:
    """``if len(X) != N: raise ...``: (the source of X, N)."""
    if not (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1
            and isinstance(st.body[0], ast.Raise) and isinstance(st.test, ast.Compare)
            and [type(o) for o in st.test.ops] == [ast.NotEq]
            and isinstance(st.test.left, ast.Call) and _is_name(st.test.left.func, "len")
            and len(st.test.left.args) == 1 and isinstance(st.test.comparators[0], ast.Constant)
            and st.test.comparators[0].value.__class__ is int):
        return None
    return ast.unparse(st.test.left.args[0]), st.test.comparators[0].value

def _bytes_cases(st: ast.If, tag: str) -> tuple[list[list[ast.stmt]], list[ast.stmt], int] | None:
    """``if tag == C1: ... elif tag == C2: ... else: E``, every C a bytes constant of one
    length: (the cases' bodies, the final else list, the length)."""
    bodies: list[list[ast.stmt]] = []
    size = None
    node: ast.stmt = st
    while True:
        t = node.test  # type: ignore[attr-defined]
        if not (isinstance(t, ast.Compare) and _is_name(t.left, tag)
                and [type(o) for o in t.ops] == [ast.Eq] and isinstance(t.comparators[0], ast.Constant)
                and isinstance(t.comparators[0].value, bytes)):
            return None
        n = len(t.comparators[0].value)
        if size is not None and n != size:
            return None
        size = n
        bodies.append(node.body)  # type: ignore[attr-defined]
        rest = node.orelse  # type: ignore[attr-defined]
        if len(rest) == 1 and isinstance(rest[0], ast.If):
            node = rest[0]
            continue
        return bodies, rest, size  # type: ignore[return-value]

def tag_implied_lengths(fn: ast.FunctionDef, formats: dict[str, str]) -> int:
    """A length check of a switch's tag (``if len(X) != N: raise``) is dropped from the
    cases whose constant (N bytes) the tag equals and that write X as ``Ns``: a bytes
    value equal to an N-byte constant has N bytes, and ``pack`` refuses any other
    kind of value. The check stays where it still decides (the final ``else``, and a
    case that does not write X that way). Only for the many-record encoders (a failing
    record raises there either way, and the per-record loop names its error). Returns
    how many checks were dropped."""
    done = 0
    for _parent, _attr, stmts in list(_stmt_lists(fn)):
        i = 0
        while i < len(stmts):
            st = stmts[i]
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1
                    and isinstance(st.targets[0], ast.Name) and _pure(st.value)):
                i += 1
                continue
            tag, what = st.targets[0].id, ast.unparse(st.value)
            j = i + 1
            while j < len(stmts) and _pure_assign(stmts[j]) is not None \
                    and tag not in _pure_assign(stmts[j]):  # type: ignore[operator]
                j += 1
            got = _bytes_cases(stmts[j], tag) if j < len(stmts) \
                and isinstance(stmts[j], ast.If) else None
            if got is None:
                i += 1
                continue
            bodies, final, size = got
            # the check just before the tag, and the same check first in a case
            before = [k for k in range(i) if _length_guard(stmts[k]) == (what, size)
                      and k == i - 1]
            reads = {n.id for n in walk(st.value) if isinstance(n, ast.Name)} | {tag}
            for body in bodies:
                if any(isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
                       and n.id in reads for x in body for n in walk(x)) \
                        or not _always_packs(body, formats, what, size):
                    if before:
                        body.insert(0, copy.deepcopy(stmts[before[0]]))
                    continue
                keep = [x for x in body if _length_guard(x) not in ((what, size), (tag, size))]
                done += len(body) - len(keep)
                body[:] = keep or [ast.Pass()]
            if before:
                final.insert(0, stmts[before[0]])
                del stmts[before[0]]
                done += 1
                i -= 1
            i += 1
    return done


def _attr_chain(e: ast.expr) -> bool:
    """``name.a.b...`` (loads only)."""
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name)

def _chain_text(e: ast.expr) -> str | None:
    """``ast.unparse`` of ``name.a.b...`` (None for anything else), without unparsing."""
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    parts.append(e.id)
    return ".".join(reversed(parts))


def _names_in(src_nodes: ast.AST) -> set[str]:
    return {n.id for n in walk(src_nodes) if isinstance(n, ast.Name)}

def reuse_reads(fn: ast.FunctionDef) -> int:
    """A value's attribute read again after it was kept in a local (``y = v.a`` and
    later ``v.a``, ``v.a.b``) is read from the local; a kept read just below checks
    of it (``if v.a.__class__ is not C: raise ...``, then ``y = v.a``) moves above
    them. The encoders only read the values they write, so a read gives the same
    object each time; a local rebound (or one a chain starts from) ends the reuse, and a
    loop's body starts without what its own statements rebind. Only for the
    many-record encoders (a failing read raises there either way). Returns how many
    reads were replaced."""
    done = 0

    def hoist(stmts: list[ast.stmt]) -> None:
        for j in range(len(stmts)):
            st = stmts[j]
            if not (_pure_assign(st) is not None and len(st.targets) == 1
                    and _attr_chain(st.value)):
                continue
            target = st.targets[0].id  # type: ignore[attr-defined]
            reads = _names_in(st.value)
            k = j
            while k > 0 and _guard(stmts[k - 1]) and target not in _names_in(stmts[k - 1]) \
                    and not reads & {target}:
                k -= 1
            if k < j:
                stmts.insert(k, stmts.pop(j))

    taken = _names_in(fn)
    fresh = (f"_k{i}" for i in range(1 << 30) if f"_k{i}" not in taken)
    # locals that only ever name a value's field (``b = v.payload``): their lengths do
    # not change; a buffer or list the encoder builds (``out`` among them) does
    assigned: dict[str, bool] = {}
    for n in walk(fn):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            assigned.setdefault(n.id, True)
        if isinstance(n, ast.Assign):
            ok = _attr_chain(n.value) and isinstance(n.value, ast.Attribute)
            for t in n.targets:
                if isinstance(t, ast.Name):
                    assigned[t.id] = assigned.get(t.id, True) and ok
        elif isinstance(n, ast.AugAssign | ast.AnnAssign | ast.For | ast.With | ast.NamedExpr) \
                or isinstance(n, ast.comprehension):
            for t in walk(n.target if not isinstance(n, ast.With) else n):
                if isinstance(t, ast.Name) and not isinstance(t.ctx, ast.Load):
                    assigned[t.id] = False
    fields = {k for k, ok in assigned.items() if ok}

    def steady(x: ast.AST) -> bool:
        """A value's field (``v.a.b``), or a local naming one: its length is fixed."""
        while isinstance(x, ast.Attribute):
            x = x.value
            if isinstance(x, ast.Name):
                return x.id != "out"
        return isinstance(x, ast.Name) and x.id in fields

    def computed(e: ast.AST) -> bool:
        """``len(x)`` (x a value's field), or ``*``, ``//``, ``%`` of such arithmetic:
        worth keeping once computed (generic, unspecialized int operations)."""
        if isinstance(e, ast.Call):
            return _is_name(e.func, "len") and len(e.args) == 1 and not e.keywords \
                and steady(e.args[0])
        return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod | ast.FloorDiv | ast.Mult) \
            and _pure_arith(e) and all(computed(c) for c in walk(e) if isinstance(c, ast.Call)) \
            and not any(_is_name(n, "out") for n in walk(e))

    def substitute(node: ast.AST, env: dict[str, str], eager: bool) -> ast.AST:
        """``node`` with kept reads and values taken from their locals; where ``eager``
        (evaluated whenever its statement runs) a value computed for the first time is
        kept (``(_kN := len(x))``) for the statements after it."""
        nonlocal done
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp
                      | ast.GeneratorExp):
            return node  # a scope of its own: left as it is
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) \
                and (key := _chain_text(node)) is not None and key in env:
            done += 1  # the longest kept chain first
            return ast.Name(env[key], ast.Load())
        for field, value in ast.iter_fields(node):
            # what runs only sometimes: an ``if`` expression's branches, the operands of
            # ``and``/``or`` after the first, a chained comparison's after the first
            lazy = (isinstance(node, ast.IfExp) and field != "test") \
                or isinstance(node, ast.BoolOp) \
                or (isinstance(node, ast.Compare) and field == "comparators")
            if isinstance(value, list):
                new = []
                for i, x in enumerate(value):
                    inner = eager and not (lazy and i > 0)
                    new.append(substitute(x, env, inner) if isinstance(x, ast.AST) else x)
                setattr(node, field, new)
            elif isinstance(value, ast.AST):
                setattr(node, field, substitute(value, env, eager and not lazy))
        if isinstance(node, ast.expr) and computed(node):
            # (its operands already from their locals: the key of what it computes)
            if ast.unparse(node) in env:
                done += 1
                return ast.Name(env[ast.unparse(node)], ast.Load())
            if not eager:
                return node
            name = next(fresh)
            env[ast.unparse(node)] = name
            return ast.NamedExpr(ast.Name(name, ast.Store()), node)
        return node

    def forget(env: dict[str, str], names: set[str]) -> None:
        for key in [k for k, v in env.items() if v in names
                    or _names_in(ast.parse(k, mode="eval")) & names]:
            del env[key]

    def run(stmts: list[ast.stmt], env: dict[str, str]) -> None:
        hoist(stmts)
        for st in stmts:
            inner = [sub for sub in _sub_lists(st)]
            stored = {n.id for n in walk(st) if isinstance(n, ast.Name)
                      and not isinstance(n.ctx, ast.Load)}
            # the statement's own expressions (a test, an iterable, a value), not its
            # bodies; a loop's test runs again after its body: nothing is kept from it
            eager = not isinstance(st, ast.While)
            for field in st._fields:
                v = getattr(st, field, None)
                if field in _BODIES or field == "handlers":
                    continue
                if isinstance(v, ast.expr) and field != "target":
                    setattr(st, field, substitute(v, env, eager))
                elif isinstance(v, list) and not isinstance(st, ast.Assign | ast.Delete):
                    setattr(st, field, [substitute(x, env, eager) if isinstance(x, ast.expr)
                                        else x for x in v])
            loop = isinstance(st, ast.For | ast.While | ast.AsyncFor)
            for sub in inner:
                mine = dict(env)
                if loop:  # a later round sees what the body rebinds
                    forget(mine, stored)
                run(sub, mine)
            if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    and isinstance(st.targets[0], ast.Name) and _attr_chain(st.value) \
                    and _pure_assign(st) is not None:
                forget(env, stored)
                target = st.targets[0].id
                if target not in _names_in(st.value):
                    env[ast.unparse(st.value)] = target
            else:
                forget(env, stored)

    run(fn.body, {})
    # a value kept but read again only to word an error costs a store on every record:
    # computed in place instead (and again in the error's words)
    in_raise = {id(n) for r in walk(fn) if isinstance(r, ast.Raise) for n in walk(r)}
    loads = {n.id for n in walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
             and id(n) not in in_raise}
    values: dict[str, ast.expr] = {}

    class Unkeep(ast.NodeTransformer):
        def visit_NamedExpr(self, node: ast.NamedExpr) -> ast.AST:
            self.generic_visit(node)
            name = node.target.id
            if name.startswith("_k") and name not in loads and name not in taken:
                values[name] = node.value
                return node.value
            return node

    class Reword(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            got = values.get(node.id)
            return copy.deepcopy(got) if got is not None and isinstance(node.ctx, ast.Load) \
                else node

    Unkeep().visit(fn)
    if values:
        Reword().visit(fn)
    return done
