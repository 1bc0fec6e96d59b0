"""``inspect`` of one record part by part, for a file that is one big record.

An HTT store or a ZE WAL is a single top-level record: inspecting it whole holds every
entry's tree at once (gigabytes for a large file). When the record has a walking plan
(``generator/plan.py``: only record references and a ``repeat: eos`` of one, so nothing of
the record's own is checked), each part is inspected on its own and handed to a sink
(text or JSON writer) as soon as it is finished; the items of the repeat are inspected
one at a time. Paths and offsets are those of the whole-record inspection.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from ..generator.plan import eval_expr
from ..runtime.errors import DecodeError
from . import inspector

Node = inspector.Node


def walkable(plan: tuple, params: set[str]) -> bool:
    """True when every ``if``/argument of the plan reads only parts decoded whole before
    it (or the record's params): those are the values the walk keeps."""
    defaults, fields = plan
    known = set(params) | set(defaults)
    for name, mode, _target, cond, arg_src, sub in fields:
        sources = ([cond] if cond else []) + [src for _, src in arg_src]
        for src in sources:
            names = {n.id for n in ast.walk(ast.parse(src, mode="eval"))
                     if isinstance(n, ast.Name)} - {"min", "max", "len", "int", "bool", "sum"}
            if not names <= known:
                return False
        if mode == "stream" and not walkable(sub, {k for k, _ in arg_src}):
            return False
        if mode == "whole":
            known.add(name)
    return True


def _rename(node: Node, old: str, new: str, name: str, kind: str) -> Node:
    """Give a part inspected on its own the paths, name and kind it has inside the whole
    record."""
    for n in node.walk():
        if n.path == old or n.path.startswith((old + ".", old + "[")):
            n.path = new + n.path[len(old):]
        if n.region is not None and (n.region == old
                                     or n.region.startswith((old + ".", old + "["))):
            n.region = new + n.region[len(old):]
    node.name, node.kind = name, kind
    return node


class TextSink:
    """Lines as ``inspect`` prints them, parents first, parts as they finish."""

    def __init__(self, read: Callable[[int, int], bytes] | None, clear: Callable[[], None]):
        self.read, self.clear = read, clear

    def open(self, node: Node, depth: int) -> None:
        label = node.path if depth == 0 else node.name
        self.clear()
        sys.stdout.write(f"{inspector.where(node)} {'':>7}  {'  ' * depth}{label}\n")

    def part(self, node: Node, depth: int) -> None:
        self.clear()
        sys.stdout.write(inspector.render_record(node, self.read, depth))

    def close(self, node: Node, depth: int) -> None:
        pass


class JsonSink:
    """The document ``inspect --json`` prints, written part by part: a parent's keys,
    then its children as they finish, then its size."""

    def __init__(self) -> None:
        self.first = [True]  # per open level: no child written yet
        self.started = False

    def _sep(self) -> str:
        if not self.started:
            self.started = True
            return '{"records": [\n'
        sep = "" if self.first[-1] else ",\n"
        self.first[-1] = False
        return sep

    def open(self, node: Node, depth: int) -> None:
        head = {"name": node.name, "path": node.path, "kind": node.kind,
                "offset": node.offset}
        sys.stdout.write(self._sep() + json.dumps(head)[:-1] + ', "children": [\n')
        self.first.append(True)

    def part(self, node: Node, depth: int) -> None:
        sys.stdout.write(self._sep() + json.dumps(node.as_dict(), default=str))

    def close(self, node: Node, depth: int) -> None:
        self.first.pop()
        sys.stdout.write(f'\n], "size": {json.dumps(node.size)}}}')


def walk(stream: BinaryIO, size: int, mod: Any, fam: Any, record: str,
         params: dict[str, Any], plan: tuple, sink: Any, how: str = "",
         full: bool = False, progress: Callable[[int], None] | None = None
         ) -> inspector.Result:
    """Inspect ``record`` at offset 0 by ``plan``, parts to ``sink``; the summary."""
    result = inspector.Result(fam.name, record, how, size, [], count=1)
    top = Node(record, record, 0, None, kind="record")
    sink.open(top, 0)
    try:
        top.end = _walk(stream, size, mod, fam, plan, 0, params, top, 1, sink, result,
                        full, progress)
    except _Stop:
        pass
    except (DecodeError, AttributeError, TypeError, KeyError) as exc:
        # an expression over a part the inspection flagged: end the walk with the error
        # on the result (the document stays well formed)
        result.failure = inspector.Failure(str(exc), stream.tell(), record)
    if top.end is None:
        top.end = stream.tell()
    sink.close(top, 0)
    if result.failure is None and top.end < size:
        result.notes.append(f"bytes {top.end}..{size} follow {record} and are not part "
                            "of it (not decoded)")
    return result


class _Stop(Exception):
    """A part failed: the failure is on the result, the walk ends there."""


def _walk(stream: BinaryIO, size: int, mod: Any, fam: Any, plan: tuple, pos: int,
          params: dict[str, Any], parent: Node, depth: int, sink: Any,
          result: inspector.Result, full: bool, progress: Any) -> int:
    defaults, fields = plan
    env = {**defaults, **params}
    for name, mode, target, cond, arg_src, sub in fields:
        path = f"{parent.path}.{name}"
        if cond is not None and not eval_expr(cond, env):
            env[name] = None  # shown as the whole-record inspection shows an absent field
            sink.part(Node(name, path, pos, pos, text="None"), depth)
            continue
        args = {k: eval_expr(src, env) for k, src in arg_src}
        if mode == "whole":
            res = inspector.inspect_stream(stream, size, mod, fam, target, args, offset=pos,
                                           full=full)
            for n in res.records:
                sink.part(_rename(n, target, path, name, "field"), depth)
            _absorb(result, res, target, path)
            end = res.records[-1].end if res.records else None
            if res.failure is not None or end is None:
                raise _Stop
            env[name] = _value(mod, fam, target, res.records[-1], stream, pos, end, args)
            pos = end
        elif mode == "stream":
            node = Node(name, path, pos, None, kind="field")
            sink.open(node, depth)
            try:
                pos = _walk(stream, size, mod, fam, sub, pos, args, node, depth + 1, sink,
                            result, full, progress)
            finally:
                node.end = node.end if node.end is not None else stream.tell()
                sink.close(node, depth)
            node.end = pos
            env[name] = None
        elif pos >= size:  # no items: a leaf, as the whole-record inspection shows it
            sink.part(Node(name, path, pos, pos, text="[]"), depth)
            env[name] = None
        else:
            node = Node(name, path, pos, None, kind="list")
            sink.open(node, depth)
            index = [0]

            def item(n: Node, index: list = index) -> None:
                # named by the inspection itself (prefix): only the top node's name
                n.name, n.kind = f"[{index[0]}]", "item"
                index[0] += 1
                sink.part(n, depth + 1)

            res = None
            if pos < size:
                res = inspector.inspect_stream(stream, size, mod, fam, target, args,
                                               repeat=True, offset=pos, full=full,
                                               progress=progress, on_record=item,
                                               prefix=path)
            node.end = size if res is None or res.failure is None else None
            if res is not None:
                # a failure is in the last item handed over (its partial tree is kept)
                i = max(index[0] - 1, 0)
                _absorb(result, res, f"{path}[{i}]", f"{path}[{i}]", only_failure=True)
                result.bad_checksums.extend(res.bad_checksums)
            if node.end is None:
                node.end = stream.tell()
                sink.close(node, depth)
                raise _Stop
            sink.close(node, depth)
            pos = size
            env[name] = None
    return pos


def _value(mod: Any, fam: Any, target: str, node: Node, stream: BinaryIO, pos: int,
           end: int, args: dict[str, Any]) -> Any:
    """A part's value for the expressions after it: the fast decode of its bytes, or,
    where that refuses what the inspection only flags (a bad checksum), the inspected
    value converted to the object model."""
    stream.seek(pos)
    raw = stream.read(end - pos)
    stream.seek(end)
    try:
        return getattr(mod, f"decode_{target}")(raw, 0, **args)[0]
    except DecodeError:
        order = [args[p] for p in fam.records[target].params]
        return getattr(mod, f"_c2m_{target}")(node.value, *order)


def _absorb(result: inspector.Result, res: inspector.Result, old: str, new: str,
            only_failure: bool = False) -> None:
    """A part's failure and bad checksums, on the whole record's result, renamed."""
    if not only_failure:
        result.bad_checksums.extend(res.bad_checksums)
    result.verified += res.verified
    result.stops.extend(res.stops)
    f = res.failure
    if f is not None and result.failure is None and (
            f.path == old or f.path.startswith((old + ".", old + "["))):
        f.path = new + f.path[len(old):]
        result.failure = f
