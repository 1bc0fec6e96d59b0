"""Rows: the many-record loop turned into one building tuples, not objects.

For ``rows: true`` records: each record is the tuple of its model fields, the loop lists
where each record starts and stops at the first record it does not take.
"""

from __future__ import annotations

import ast
import re

from .astwalk import stmt_lists as _stmt_lists
from .astwalk import walk


def _rows_transform(fn: ast.FunctionDef, classes: set[str]) -> str | None:
    """Turn the many-loop ``fn`` (see ``FastEmitter.rows_loop``) into its rows twin in
    place; returns why it cannot (None: done)."""
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                and re.match(r"_[dum]_", n.func.id):
            return f"its loop decodes a sub-record out of line ({n.func.id})"

    def obj_of(st: ast.stmt) -> str | None:
        """The target of ``X = _new(Cls)`` / ``X = Cls()`` for a record class."""
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call)
                and isinstance(st.value.func, ast.Name)):
            return None
        call = st.value
        if call.func.id == "_new" and len(call.args) == 1 and isinstance(call.args[0], ast.Name) \
                and call.args[0].id in classes:
            return st.targets[0].id
        if call.func.id in classes and not call.args and not call.keywords:
            return st.targets[0].id
        return None

    def stored(st: ast.stmt, target: str) -> ast.expr | None:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                and isinstance(st.targets[0], ast.Attribute) \
                and isinstance(st.targets[0].value, ast.Name) and st.targets[0].value.id == target:
            return st.value
        return None

    def rewrite(stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        i = 0
        while i < len(stmts):
            st = stmts[i]
            target = obj_of(st)
            if target is None:
                out.append(st)
                i += 1
                continue
            values = []
            i += 1
            while i < len(stmts) and (v := stored(stmts[i], target)) is not None:
                values.append(v)
                i += 1
            out.append(ast.Assign([ast.Name(target, ast.Store())],
                                  ast.Tuple(values, ast.Load()), lineno=0))
        return out

    class Rows(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "PackedArray":
                return node.args[0]  # a packed view is its raw bytes
            if isinstance(node.func, ast.Name) and node.func.id == "_rest":
                return _rows_result("_rs")  # stop at the record the loop does not take
            return node

        def visit_Return(self, node: ast.Return) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.value, ast.Name) and node.value.id == "_out":
                return ast.Return(_rows_result("max(_p0, _end)"))
            return node

    for node, attr, stmts in list(_stmt_lists(fn)):
        setattr(node, attr, rewrite(stmts))
    Rows().visit(fn)
    # where each record starts, beside its row (the appends are the loop's own lines)
    taken = ast.parse("_starts = []\n_sappend = _starts.append").body
    first = next(i for i, st in enumerate(fn.body) if isinstance(st, ast.Try))
    fn.body[first:first] = taken

    class Starts(ast.NodeTransformer):
        def visit_Expr(self, node: ast.Expr) -> ast.AST | list[ast.stmt]:
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) \
                    and call.func.id == "_append":
                return [ast.parse("_sappend(_rs)").body[0], node]
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == "_out" \
                    and call.func.attr == "pop":
                return [node, ast.parse("_starts.pop()").body[0]]
            return node
    Starts().visit(fn)
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_new":
            return "a record object is built in a way the loop cannot turn into a row"
    return None

def _rows_result(stop: str) -> ast.expr:
    return ast.parse(f"(_out, _starts, {stop})", mode="eval").body
