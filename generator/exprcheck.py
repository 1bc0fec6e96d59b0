"""Schema-level meaning of expressions: enum members by name and the types compared.

``ENUM.MEMBER`` (schema or class name) becomes the member's integer before any emitter
sees the expression, so every codec path reads the same constant. Comparisons whose two
sides can never be equal (a ``bytes`` field against a string literal, a ``str`` field
against an integer, members of two different enums) are refused at resolve time: at run
time they would be silently false.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable

from . import ir
from .expr import Expr, lookup_parts
from .model import camel

# the kind of a value: "int" (ints, bools, floats, flags), "str", "bytes",
# ("enum", NAME) for an enum member, ("record", NAME) for a sub-record, ("list", KIND);
# "?" or None: nothing known
Kind = object


def substitute_enums(e: Expr, enums: dict[str, ir.EnumDef], local: set[str]) -> Expr:
    """``ENUM.MEMBER`` -> the member's value (names of fields and params win)."""
    subst: set[str] = set()

    class Sub(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:  # noqa: N802
            base = node.value
            if isinstance(base, ast.Name) and base.id not in local:
                name = next((n for n in enums if base.id in (n, camel(n))), None)
                if name is not None:
                    value = enums[name].value_of(node.attr)
                    if value is None:
                        raise ValueError(f"enum {name!r} has no member {node.attr!r}")
                    subst.add(base.id)
                    out = ast.copy_location(ast.Constant(value), node)
                    out.bw_enum = name  # type: ignore[attr-defined]
                    return out
            self.generic_visit(node)
            return node

    tree = Sub().visit(copy.deepcopy(e.tree))
    if not subst:
        return e
    fields = {id(kw.value) for c in ast.walk(tree) if isinstance(c, ast.Call)
              for kw in c.keywords}  # lookup's key=/value= name item fields, not roots
    remaining = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                 and id(n) not in fields}
    return Expr(e.source, tree, frozenset(n for n in e.names
                                          if n not in subst or n in remaining))


def field_kind(t: ir.Type, family_enums: dict, aliases: dict) -> Kind:
    if isinstance(t, ir.BytesT):
        return "str" if t.text else "bytes"
    if isinstance(t, ir.RefT):
        if t.kind == "enum":
            return None if family_enums[t.target].open else ("enum", t.target)
        if t.kind == "record":
            return ("record", t.target)
        return "int"
    if isinstance(t, ir.IntT | ir.VarintT | ir.FloatT):
        return "int"
    return None


def _family(k: Kind) -> str | None:
    if k in ("int", "bool") or (isinstance(k, tuple) and k[0] == "enum"):
        return "number"
    if k in ("str", "bytes"):
        return str(k)
    return None


def _show(k: Kind) -> str:
    if isinstance(k, tuple) and k[0] == "enum":
        return f"a member of enum {k[1]!r}"
    return {"int": "an integer", "bool": "a bool", "str": "a str", "bytes": "bytes"}.get(
        str(k), str(k))


def problems(e: Expr, root: Callable[[str], Kind], member: Callable[[Kind, str], Kind]
             ) -> list[str]:
    """Mismatched comparisons in ``e``. ``root(name)`` is a bare name's kind, ``member``
    the kind of a member of a record kind: ``"?"`` for a field of no comparable kind,
    ``None`` when there is no such field or the kind is not a record."""
    out: list[str] = []

    def seg(node: ast.AST) -> str:  # as written (enum members by name)
        return ast.get_source_segment(e.source, node) or ast.unparse(node)

    def kind(node: ast.AST) -> Kind:
        if isinstance(node, ast.Constant):
            if hasattr(node, "bw_enum"):
                return ("enum", node.bw_enum)
            v = node.value
            return ("bool" if isinstance(v, bool) else "int" if isinstance(v, int)
                    else "str" if isinstance(v, str) else "bytes")
        if isinstance(node, ast.Name):
            return "bool" if node.id in ("True", "False") else root(node.id)
        if isinstance(node, ast.Attribute):
            return member(kind(node.value), node.attr)
        if isinstance(node, ast.BinOp):
            a, b = kind(node.left), kind(node.right)
            if "str" in (a, b) or "bytes" in (a, b):  # concatenation, repetition
                return a if a in ("str", "bytes") else b
            return "int" if _family(a) == "number" and _family(b) == "number" else None
        if isinstance(node, ast.UnaryOp):
            return "bool" if isinstance(node.op, ast.Not) else "int"
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            kind(node.left)  # ``x is (not) None``: any value may be absent
            return "bool"
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                compare(left, right, op)
                left = right
            return "bool"
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                kind(v)
            return None
        if isinstance(node, ast.IfExp):
            kind(node.test)
            a, b = kind(node.body), kind(node.orelse)
            return a if a == b else None
        if isinstance(node, ast.Call):
            fn = node.func.id  # type: ignore[attr-defined]
            if fn == "lookup":
                return lookup_kind(node)
            for a in node.args:
                kind(a)
            return {"len": "int", "int": "int", "bool": "bool", "sum": "int"}.get(fn)
        return None

    def lookup_kind(node: ast.Call) -> Kind:
        lst, key, default, kname, vname = lookup_parts(node)
        lk = kind(lst)
        item = lk[1] if isinstance(lk, tuple) and lk[0] == "list" else None
        kk = kind(key)
        dk = kind(default)
        if isinstance(item, tuple) and item[0] == "record":
            ik, iv = member(item, kname), member(item, vname)
            for n, k in ((kname, ik), (vname, iv)):
                if k is None:
                    out.append(f"lookup: the items of {seg(lst)!r} have no field {n!r}")
            mismatch(ik, kk, f"lookup key {seg(key)}")
            mismatch(iv, dk, f"lookup default {seg(default)}")
            return iv
        if lk is not None and not (isinstance(lk, tuple) and lk[0] == "list"):
            out.append(f"lookup needs a list of records, not {seg(lst)!r}")
        return None

    def mismatch(a: Kind, b: Kind, what: str) -> None:
        fa, fb = _family(a), _family(b)
        if fa is None or fb is None:
            return
        if fa != fb or (isinstance(a, tuple) and isinstance(b, tuple) and a != b):
            out.append(f"{what}: compares {_show(a)} with {_show(b)}, which are never equal")

    def compare(left: ast.AST, right: ast.AST, op: ast.cmpop) -> None:
        a, b = kind(left), kind(right)
        fa, fb = _family(a), _family(b)
        if fa is None or fb is None:
            return
        if fa != fb or (isinstance(a, tuple) and isinstance(b, tuple) and a != b):
            hint = ""
            if fa == "bytes" and fb == "str" or fa == "str" and fb == "bytes":
                hint = " (write a bytes literal b'...' for bytes, or a str field for text)"
            elif isinstance(a, tuple) and fb == "str" or isinstance(b, tuple) and fa == "str":
                hint = " (write ENUM.MEMBER)"
            out.append(f"{seg(left)} {_cmp(op)} {seg(right)} compares "
                       f"{_show(a)} with {_show(b)}{hint}")

    kind(e.tree)
    return out


def _cmp(op: ast.cmpop) -> str:
    return {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">="}[type(op)]
