"""Lookups in the rows loop: items of a list are tuples there, not objects.

``lookup(tags, K, D, key=id, value=kind)`` renders, in the fast decoders, as a generator
over the list whose items are read by attribute (``_lk.kind`` or a checked
``_attr(_lk, 'kind', ...)``). The rows twin of a many-loop builds nested records as
tuples of their model fields, so there the same reads become tuple indexing
(``_lk[1]``), by the item record's model order.
"""

from __future__ import annotations

import ast

from . import ir

ITEM = "_lk"  # the item name lookup() renders (generator/expr.py)


def item_orders(rec: ir.Record, family: ir.Family) -> dict[str, list[str]]:
    """``f_<list>`` -> the model field names of its item record, for each repeated record
    field of ``rec``."""
    out: dict[str, list[str]] = {}
    for f in rec.fields:
        t = f.type
        if f.repeat is not None and isinstance(t, ir.RefT) and t.kind == "record":
            out[f"f_{f.name}"] = [x.name for x in family.records[t.target].model_fields]
    return out


def rewrite(fn: ast.FunctionDef, orders: dict[str, list[str]]) -> str | None:
    """Index the items of every lookup over a known list; the reason when one reads a
    list this cannot tell the items of (None: done)."""
    problem: list[str] = []

    class Items(ast.NodeTransformer):
        def __init__(self, names: list[str]) -> None:
            self.names = names

        def index(self, attr: str, node: ast.AST) -> ast.AST:
            if attr not in self.names:
                problem.append(f"a lookup reads {attr!r}, which its items do not hold")
                return node
            return ast.Subscript(ast.Name(ITEM, ast.Load()),
                                 ast.Constant(self.names.index(attr)), ast.Load())

        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            if isinstance(node.value, ast.Name) and node.value.id == ITEM:
                return self.index(node.attr, node)
            return self.generic_visit(node)

        def visit_Call(self, node: ast.Call) -> ast.AST:
            if isinstance(node.func, ast.Name) and node.func.id == "_attr" and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id == ITEM \
                    and isinstance(node.args[1], ast.Constant):
                return self.index(node.args[1].value, node)
            return self.generic_visit(node)

    for gen in [n for n in ast.walk(fn) if isinstance(n, ast.GeneratorExp)]:
        comp = gen.generators[0]
        if not (isinstance(comp.target, ast.Name) and comp.target.id == ITEM):
            continue
        names = orders.get(comp.iter.id) if isinstance(comp.iter, ast.Name) else None
        if names is None:
            return "a lookup reads a list whose items the rows loop cannot index"
        t = Items(names)
        gen.elt = t.visit(gen.elt)
        comp.ifs = [t.visit(x) for x in comp.ifs]
    return problem[0] if problem else None
