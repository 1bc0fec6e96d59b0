"""The schema expression language: a small, safe subset of Python expression syntax.

Conditions (``if``), counts, sizes, switch tags and sub-record arguments are written as
expressions such as ``version >= 2``, ``semantic_dims - 16`` or
``header.flags.compressed and snap_node_count > 0``. They are parsed once with ``ast``,
checked against a whitelist, and rendered to Python source by a *resolver* that decides
what a bare name means in the target (a local in the fast path, ``this[...]`` in the
Construct path).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
           ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
           ast.GtE: ">="}
FUNCTIONS = {"min", "max", "len", "int", "bool", "sum", "lookup"}
# ``lookup(LIST, KEY, DEFAULT, key=NAME, value=NAME)``: the item fields it reads by default
LOOKUP_FIELDS = {"key": "key", "value": "value"}


class ExprError(ValueError):
    """An expression outside the language (reported as a schema problem)."""


@dataclass(frozen=True)
class Expr:
    """A parsed expression; ``names`` are the bare root names it reads."""

    source: str
    tree: ast.expr
    names: frozenset[str]

    def render(self, resolve: Callable[[str], str]) -> str:
        """Python source with every root name replaced by ``resolve(name)``."""
        return _render(self.tree, resolve)

    def constant(self) -> object | None:
        """The value when the expression is a literal, else ``None``."""
        return self.tree.value if isinstance(self.tree, ast.Constant) else None

    def simple_name(self) -> str | None:
        """The name when the expression is one bare name (``snap_node_count``)."""
        return self.tree.id if isinstance(self.tree, ast.Name) else None


def parse(source: str | int | bool) -> Expr:
    """Parse an expression (ints and bools are accepted as literals)."""
    if isinstance(source, bool) or isinstance(source, int):
        text = repr(source)
    elif isinstance(source, str):
        text = source.strip()
    else:
        raise ExprError(f"expected an expression, found {type(source).__name__}")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {text!r}: {exc.msg}") from None
    names: set[str] = set()
    _check(tree, names)
    return Expr(text, tree, frozenset(names))


def is_none_test(node: ast.Compare) -> bool:
    """``x is None`` / ``x is not None``: whether an optional value is present."""
    return len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) \
        and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None


def _check(node: ast.AST, names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, (int, bool, str, bytes)) or node.value is None:
            raise ExprError(f"unsupported literal {node.value!r}")
    elif isinstance(node, ast.Name):
        # a bare name is a field or param even when it spells a function (``len``):
        # functions are only recognised in call position
        if node.id not in ("True", "False"):
            names.add(node.id)
    elif isinstance(node, ast.Attribute):
        _check(node.value, names)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        _check(node.left, names)
        _check(node.right, names)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
            raise ExprError("only 'not', '-' and '~' are allowed as unary operators")
        _check(node.operand, names)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value, names)
    elif isinstance(node, ast.Compare) and is_none_test(node):
        _check(node.left, names)  # an optional value's presence: ``x is (not) None``
    elif isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _CMPOPS:
                raise ExprError(f"comparison {type(op).__name__} is not allowed")
        _check(node.left, names)
        for comp in node.comparators:
            _check(comp, names)
    elif isinstance(node, ast.IfExp):
        for part in (node.test, node.body, node.orelse):
            _check(part, names)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExprError(f"only {sorted(FUNCTIONS)} may be called")
        if node.func.id == "lookup":
            lookup_parts(node)  # raises on a malformed call
        elif node.keywords:
            raise ExprError("keyword arguments are not allowed")
        for arg in node.args:
            _check(arg, names)
    else:
        raise ExprError(f"{type(node).__name__} is not part of the expression language")


def _render(node: ast.AST, resolve: Callable[[str], str]) -> str:
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, ast.Name):
        if node.id in ("True", "False"):
            return node.id
        return resolve(node.id)
    if isinstance(node, ast.Attribute):
        hook = getattr(resolve, "attr", None)  # e.g. a checked access in decoders
        if hook is not None:
            return hook(_render(node.value, resolve), node.attr)
        return f"{_render(node.value, resolve)}.{node.attr}"
    if isinstance(node, ast.BinOp):
        op = _BINOPS[type(node.op)]
        return f"({_render(node.left, resolve)} {op} {_render(node.right, resolve)})"
    if isinstance(node, ast.UnaryOp):
        op = {ast.Not: "not ", ast.USub: "-", ast.Invert: "~"}[type(node.op)]
        return f"({op}{_render(node.operand, resolve)})"
    if isinstance(node, ast.BoolOp):
        op = " and " if isinstance(node.op, ast.And) else " or "
        return "(" + op.join(_render(v, resolve) for v in node.values) + ")"
    if isinstance(node, ast.Compare) and is_none_test(node):
        op = "is" if isinstance(node.ops[0], ast.Is) else "is not"
        return f"({_render(node.left, resolve)} {op} None)"
    if isinstance(node, ast.Compare):
        parts = [_render(node.left, resolve)]
        for op, comp in zip(node.ops, node.comparators, strict=True):
            parts.append(_CMPOPS[type(op)])
            parts.append(_render(comp, resolve))
        return "(" + " ".join(parts) + ")"
    if isinstance(node, ast.IfExp):
        return (f"({_render(node.body, resolve)} if {_render(node.test, resolve)} "
                f"else {_render(node.orelse, resolve)})")
    if isinstance(node, ast.Call) and node.func.id == "lookup":
        return _render_lookup(node, resolve)
    if isinstance(node, ast.Call):
        args = ", ".join(_render(a, resolve) for a in node.args)
        hook = getattr(resolve, "call", None)  # e.g. a checked int() in decoders
        if hook is not None and node.func.id == "int":
            return hook(node.func.id, args)
        return f"{node.func.id}({args})"
    raise ExprError(f"cannot render {type(node).__name__}")  # unreachable after _check


def lookup_parts(node: ast.Call) -> tuple[ast.expr, ast.expr, ast.expr, str, str]:
    """``lookup(LIST, KEY, DEFAULT, key=NAME, value=NAME)`` taken apart: the list, the key
    looked for, the value when no item has it, and the item fields holding key and value."""
    if len(node.args) != 3:
        raise ExprError("lookup takes a list, a key and a default: "
                        "lookup(LIST, KEY, DEFAULT, key=NAME, value=NAME)")
    names = dict(LOOKUP_FIELDS)
    for kw in node.keywords:
        if kw.arg not in LOOKUP_FIELDS:
            raise ExprError(f"lookup has no keyword {kw.arg!r} (key=NAME, value=NAME)")
        if not isinstance(kw.value, ast.Name):
            raise ExprError(f"lookup's {kw.arg}= names a field of the items (a bare name)")
        names[kw.arg] = kw.value.id
    return node.args[0], node.args[1], node.args[2], names["key"], names["value"]


def _render_lookup(node: ast.Call, resolve: Callable[[str], str]) -> str:
    # one generator expression, the same source on every path: the first item whose key
    # field equals KEY gives its value field; no such item gives DEFAULT
    lst, key, default, kname, vname = lookup_parts(node)
    hook = getattr(resolve, "attr", None)
    item = "_lk"

    def get(name: str) -> str:
        return hook(item, name) if hook is not None else f"{item}.{name}"

    return (f"next(({get(vname)} for {item} in {_render(lst, resolve)} "
            f"if {get(kname)} == {_render(key, resolve)}), {_render(default, resolve)})")
