"""The fast emitter's shared tree walk (generator/fast/astwalk.py) and the many-record
encoder's piece gathering (generator/fast/many.py) on nested bodies: ``walk`` visits the
nodes of ``ast.walk`` in the same order, and ``gather_parts`` turns every ``out += piece``
into an append at every depth, writing the bytes the original wrote."""

from __future__ import annotations

import ast
import inspect
import textwrap
from types import SimpleNamespace

from bytewright.generator.fast import astwalk
from bytewright.generator.fast.many import gather_parts


def test_walk_visits_what_ast_walk_visits_in_its_order() -> None:
    # the standard library's ast module: classes, comprehensions, lambdas, f-strings,
    # try/except, dict displays with ``**`` (a None key), global statements; every node
    # but the load/store markers (``ctx``), which the passes read from their names
    tree = ast.parse(inspect.getsource(ast))
    want = [id(n) for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
    assert [id(n) for n in astwalk.walk(tree)] == want


def test_stmt_lists_yields_each_statement_list_once() -> None:
    tree = ast.parse(textwrap.dedent("""
        if a:
            x = 1
            if b:
                y = 2
            else:
                y = 3
        try:
            z = 4
        except E:
            z = 5
        finally:
            w = 6
    """))
    lists = [id(lst) for _parent, _attr, lst in astwalk.stmt_lists(tree)]
    # module body, if body, inner if body and else, try body, handler body, finally
    assert len(lists) == len(set(lists)) == 7


def _nested_writer(depth: int) -> str:
    lines = ["def f(out, v):"]
    for i in range(depth):
        pad = "    " * (i + 1)
        lines.append(f"{pad}out += bytes([{i}])")
        lines.append(f"{pad}if v.go:")
    lines.append("    " * (depth + 1) + "out += b'end'")
    return "\n".join(lines)


def test_gather_parts_rewrites_pieces_at_every_depth() -> None:
    depth = 40  # each nested list rewritten once: a walk per ancestor would not finish
    src = _nested_writer(depth)
    fn = ast.parse(src).body[0]
    assert gather_parts(fn.body, direct="_a")
    rewritten = ast.unparse(fn)
    assert "out +=" not in rewritten
    assert rewritten.count("_a(") == depth + 1

    want = bytearray()
    ns: dict = {}
    exec(src, ns)
    ns["f"](want, SimpleNamespace(go=True))
    parts: list[bytes] = []
    ns2: dict = {"_a": parts.append}
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), "<t>", "exec"), ns2)
    ns2["f"](None, SimpleNamespace(go=True))
    assert b"".join(parts) == bytes(want)
