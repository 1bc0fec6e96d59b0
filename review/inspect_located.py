"""``inspect`` of a record with located fields (``at:``): after its sequential bytes, each
structure it locates is traced where it lies, as a child of the record named by its
field path (``zip_file.entries``, ``zip_file.files[1]``), nested ones too."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from ..generator import ir
from ..runtime.errors import DecodeError
from ..runtime.located import Lazy, LazyList


def places(fam: ir.Family, record: str, value: Any, path: str,
           origin: int) -> Iterator[tuple[str, str, str, int, int | None]]:
    """``(path, name, target record, absolute offset, records in a run or None)`` of
    every structure ``value`` locates, nested ones after their holder."""
    for loc in fam.records[record].located:
        v = getattr(value, loc.name, None)
        if v is None or loc.target == "bytes":  # raw bytes: no record to trace
            continue
        sub = f"{path}.{loc.name}"
        if isinstance(v, LazyList):
            for i, at in enumerate(v.offsets):
                yield f"{sub}[{i}]", f"{loc.name}[{i}]", loc.target, origin + at, None
                yield from places(fam, loc.target, v[i], f"{sub}[{i}]", origin)
        elif isinstance(v, Lazy):
            got = v.get()
            yield sub, loc.name, loc.target, origin + v.offset, (len(got) if loc.many
                                                               else None)
            for i, x in enumerate(got if loc.many else [got]):
                yield from places(fam, loc.target, x, f"{sub}[{i}]" if loc.many else sub,
                                  origin)


def trace(stream: BinaryIO, size: int, mod: Any, fam: ir.Family, record: str, root: Any,
          offset: int, tracer: Any, con_of: Callable[[str], Any],
          failure: Callable[[BaseException, Any, str], Any]) -> Any:
    """Trace the structures the record at ``offset`` locates into ``root``'s children;
    the failure met (as ``inspect`` reports it), else None."""
    stream.seek(0)
    data = stream.read(size)
    value = getattr(mod, f"decode_{record}")(data, offset)[0]
    where = places(fam, record, value, record, offset)
    while True:
        try:
            path, name, target, at, run = next(where)
        except StopIteration:
            return None
        except DecodeError as exc:  # a structure that does not decode: seen below
            return failure(exc, tracer, exc.path)
        tracer.reset(path)
        stream.seek(at)
        try:
            for _ in range(1 if run is None else run):
                con_of(target).parse_stream(stream)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            _adopt(root, tracer.top, name)
            return failure(exc, tracer, path)
        _adopt(root, tracer.top, name)


def _adopt(root: Any, nodes: list, name: str) -> None:
    for i, n in enumerate(nodes):
        n.name = name if len(nodes) == 1 else f"{name}[{i}]"
        if len(nodes) > 1:
            n.path = f"{n.path}[{i}]"
        root.children.append(n)
