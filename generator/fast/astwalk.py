"""Walking the emitted syntax trees: the small queries every pass shares.

``walk`` visits nodes in the order of :func:`ast.walk` (breadth first, children in field
order) with one generator instead of three nested ones: the passes walk every emitted
function several times, and the standard walk's per-node overhead was most of the
generator's time. ``stmt_lists`` yields each statement list once.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator

_AST = ast.AST
# fields that never hold a node the passes look for: names and flags, and a name's
# load/store marker (``ctx``: the passes read ``n.ctx`` from the name, never visit it)
_SCALAR_FIELDS = frozenset({"ctx", "id", "arg", "attr", "name", "module", "level", "kind",
                            "type_comment", "is_async", "conversion"})
_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}


def _fields(cls: type) -> tuple[str, ...]:
    got = _FIELDS[cls] = tuple(f for f in cls._fields if f not in _SCALAR_FIELDS)
    return got


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself first) but the load/store markers, in
    :func:`ast.walk`'s order."""
    todo = deque((node,))
    pop, push = todo.popleft, todo.append
    fields = _FIELDS
    while todo:
        n = pop()
        cls = n.__class__
        names = fields.get(cls)
        if names is None:
            names = _fields(cls)
        for name in names:
            v = getattr(n, name, None)
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, _AST):
                        push(x)
            elif isinstance(v, _AST):
                push(v)
        yield n


def is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def raises(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Raise)


def stmt_lists(node: ast.AST) -> Iterator[tuple[ast.AST, str, list]]:
    """Every statement list under ``node`` (bodies, else branches, handlers), each once;
    walks statements only (expressions hold none)."""
    stack = [node]
    while stack:
        n = stack.pop()
        for attr in ("body", "orelse", "finalbody", "handlers"):
            lst = getattr(n, attr, None)
            if isinstance(lst, list) and lst:
                if isinstance(lst[0], ast.stmt):
                    yield n, attr, lst
                stack.extend(lst)


def stores(node: ast.AST) -> set[str]:
    """The names ``node`` assigns (or deletes)."""
    return {n.id for n in walk(node) if isinstance(n, ast.Name)
            and not isinstance(n.ctx, ast.Load)}


UNSIGNED_CODES = set("BHILQN")  # struct codes of unsigned integers (values >= 0)
