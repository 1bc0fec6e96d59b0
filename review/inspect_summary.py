"""``inspect FILE``'s summary of a file of many records: what it holds, at file speed.

A pile (a run of records) or a store or log that is one big record holding a list of
entries (an HTT store, a ZE WAL: a record with a walking plan, ``generator/plan.py``) is
summarised instead of listed field by field: its parts with offset and size, and for each
list the number of items by type, where the first and the last begin. Records are decoded
by the generated fast path (every check and checksum included) over a map of the file
whose walked pages are released as it goes, so memory stays bounded. Where the fast path
refuses a record, that one record is inspected field by field (``inspector``) for the
exact path, offset and checksum status the listing gives; a checksum mismatch is reported
and the summary goes on after the record, any other failure ends it, as in the listing.
"""

from __future__ import annotations

import dataclasses
import io
import json
import mmap
from collections import Counter
from collections.abc import Callable
from typing import Any, BinaryIO

from ..generator import ir
from ..generator.plan import eval_expr, stream_plan
from ..runtime.errors import DecodeError
from ..runtime.fastpath import LogList
from ..runtime.mapped import RELEASE_EVERY, releaser
from . import inspect_walk, inspector


@dataclasses.dataclass
class Part:
    """One part of the file: a record decoded whole, or a list of items."""

    path: str
    offset: int
    end: int | None = None
    depth: int = 0
    text: str | None = None  # an absent part: "None"; an empty list: "[]"
    record: str | None = None  # the items' record (lists)
    items: int | None = None  # lists: how many items decoded
    types: Counter = dataclasses.field(default_factory=Counter)
    first: int | None = None
    last: int | None = None
    inner: dict[str, int] = dataclasses.field(default_factory=dict)  # a whole part's lists

    def as_dict(self) -> dict:
        d: dict[str, Any] = {"path": self.path, "offset": self.offset,
                             "size": None if self.end is None else self.end - self.offset}
        if self.text is not None:
            d["value"] = self.text
        if self.items is not None:
            d.update(record=self.record, items=self.items, types=dict(self.types),
                     first=self.first, last=self.last)
        if self.inner:
            d["lists"] = dict(self.inner)
        return d


@dataclasses.dataclass
class Summary:
    result: inspector.Result
    parts: list[Part]
    records: int = 0  # records and list items decoded
    checksums: bool = False  # the records declare a checksum the decode verified

    def as_dict(self) -> dict:
        d = self.result.as_dict()
        del d["records"]
        d["summary"] = {"parts": [p.as_dict() for p in self.parts],
                        "records": self.records}
        return d


class _Stop(Exception):
    """A record failed (the failure is on the result): the summary ends there."""


def _camel(name: str) -> str:
    return "".join(x.capitalize() for x in name.split("_"))


class _Typer:
    """An item's type as a reader names it: the labels of the switch cases its value took
    (an enum tag by name, a byte-string tag by the case's record), nested switches
    included; a record without a switch is its own type."""

    def __init__(self, mod: Any, fam: ir.Family) -> None:
        self.fam = fam
        self.records = {getattr(mod, _camel(r), None): r for r in fam.records}
        self.records.pop(None, None)
        self.plans: dict[str, list] = {}

    def _plan(self, record: str) -> list:
        plan = self.plans.get(record)
        if plan is None:
            plan = []
            rec = self.fam.records.get(record)
            fields = {f.name for f in rec.fields} if rec else set()
            for f in rec.fields if rec else ():
                t = f.type
                if not isinstance(t, ir.SwitchT) or f.repeat is not None:
                    continue
                names = sorted(t.on.names)
                tag = names[0] if len(names) == 1 and names[0] in fields \
                    and t.on.source.strip() == names[0] else None
                labels = {}
                for key, label, target in t.cases:
                    # a byte-string or bare-number tag reads better as its case's record
                    plain = isinstance(key, bytes) or label == str(key)
                    labels[key] = target if plain and target else label
                plan.append((f.name, tag, labels))
            self.plans[record] = plan
        return plan

    def __call__(self, value: Any, record: str) -> str:
        labels: list[str] = []
        self._label(value, record, labels, 0)
        return "/".join(labels) if labels else record

    def _label(self, value: Any, record: str, out: list[str], depth: int) -> None:
        for name, tag, labels in self._plan(record):
            sub = getattr(value, name, None)
            label = None
            if tag is not None:
                key = getattr(value, tag, None)
                label = labels.get(int(key) if isinstance(key, int) else key)
            target = self.records.get(type(sub))
            if label is None:
                label = target
            if label is None:  # nothing taken (an absent part, or bytes kept raw)
                continue
            if not out or out[-1] != label:
                out.append(label)
            if target is not None and depth < 3:
                self._label(sub, target, out, depth + 1)


def _reachable(fam: ir.Family, record: str) -> tuple[bool, bool]:
    """(any checksum, any log that stops at damage) in ``record`` and what it contains."""
    seen, todo = set(), [record]
    checks = logs = False
    while todo:
        name = todo.pop()
        if name in seen or name not in fam.records:
            continue
        seen.add(name)
        for f in fam.records[name].fields:
            checks = checks or f.checksum is not None
            logs = logs or (f.repeat is not None and f.repeat.stop_on_error)
            todo.extend(ir.referenced_records(f.type))
    return checks, logs


def _log_stops(value: Any, depth: int = 0) -> list:
    """The ``stop`` of every log inside a decoded value that ended early at damage."""
    out: list = []
    if depth > 8:
        return out
    if isinstance(value, LogList) and value.stop is not None:
        out.append(value.stop)
    if isinstance(value, list):
        for v in value:
            if hasattr(v, "__slots__") or hasattr(v, "__dict__") or isinstance(v, list):
                out.extend(_log_stops(v, depth + 1))
        return out
    names = getattr(type(value), "__slots__", None) or list(getattr(value, "__dict__", ()))
    for n in names:
        v = getattr(value, n, None)
        if isinstance(v, list) or (v is not None and not isinstance(
                v, (int, float, str, bytes, bytearray, memoryview))):
            out.extend(_log_stops(v, depth + 1))
    return out


class _Summarizer:
    def __init__(self, buf: Any, size: int, stream: BinaryIO, mod: Any, fam: ir.Family,
                 result: inspector.Result, progress: Callable[[int], None] | None,
                 release: Callable[[int], None] | None) -> None:
        self.buf, self.size, self.stream, self.mod, self.fam = buf, size, stream, mod, fam
        self.result, self.progress, self.release = result, progress, release
        self.parts: list[Part] = []
        self.records = 0
        self.typer = _Typer(mod, fam)
        self.logs = False

    def _traced(self, pos: int, record: str, args: dict[str, Any], path: str) -> tuple:
        """The record at ``pos`` inspected field by field: (end, its node) when it
        decoded (checksum mismatches noted), else the failure is noted and the walk ends."""
        res = inspector.inspect_stream(self.stream, self.size, self.mod, self.fam, record,
                                       args, offset=pos)
        for n in res.records:
            inspect_walk._rename(n, record, path, path.rsplit(".", 1)[-1], "field")
        inspect_walk._absorb(self.result, res, record, path)
        node = res.records[-1] if res.records else None
        if res.failure is not None or node is None or node.end is None:
            if self.result.failure is None:
                self.result.failure = res.failure or inspector.Failure(
                    "the record does not decode", pos, path)
            raise _Stop
        self.records += 1
        return node.end, node

    def _stops(self, value: Any, path: str) -> None:
        for stop in _log_stops(value):
            self.result.stops.append(f"{path}: a log ends at offset {stop.offset} "
                                     f"({stop.reason}: {stop.detail}); the bytes after "
                                     "it are not read")

    def whole(self, pos: int, record: str, args: dict[str, Any], path: str,
              depth: int) -> tuple[Any, int]:
        """One record decoded whole: (value, end)."""
        part = Part(path, pos, depth=depth, record=record)
        self.parts.append(part)
        try:
            value, end = getattr(self.mod, f"decode_{record}")(self.buf, pos, **args)
            self.records += 1
        except DecodeError:
            end, node = self._traced(pos, record, args, path)
            value = inspect_walk._value(self.mod, self.fam, record, node, self.stream, pos,
                                        end, args)
        part.end = end
        rec = self.fam.records[record]
        for f in rec.fields:
            if f.repeat is not None:
                items = getattr(value, f.name, None)
                if isinstance(items, list):
                    part.inner[f.name] = len(items)
        if self.logs:
            self._stops(value, path)
        return value, end

    def items(self, pos: int, end: int, record: str, args: dict[str, Any], path: str,
              depth: int, first: int = 0) -> int:
        """Items of ``record`` from ``pos`` to ``end``, numbered from ``first`` (a run
        after a head record goes on counting from it, as the listing names them);
        where the last one ends."""
        part = Part(path, pos, depth=depth, record=record, items=0)
        self.parts.append(part)
        types, typer = part.types, self.typer
        it = getattr(self.mod, f"iter_{record}")
        mark = pos + RELEASE_EVERY
        index = first
        last = None
        try:
            while pos < end:
                try:
                    start = pos
                    for value, nxt in it(self.buf, pos, end, **args):
                        last = start
                        types[typer(value, record)] += 1
                        if self.logs:
                            self._stops(value, f"{path}[{index}]")
                        index += 1
                        start = pos = nxt
                        if pos >= mark:
                            mark = pos + RELEASE_EVERY
                            if self.release is not None:
                                self.release(pos)
                            if self.progress is not None:
                                self.progress(pos)
                except DecodeError:
                    # the item at pos is refused: inspected field by field, for the
                    # listing's own words; a checksum mismatch only, and the walk goes on
                    nxt, node = self._traced(pos, record, args, f"{path}[{index}]")
                    self.records -= 1  # counted below with the others
                    last = pos
                    types[self._type_of(node, record, pos, nxt, args)] += 1
                    index += 1
                    pos = nxt
        finally:
            part.items = index - first
            part.first = part.offset if part.items else None
            part.last = last
            part.end = pos
            self.records += part.items
        return pos

    def _type_of(self, node: inspector.Node, record: str, pos: int, end: int,
                 args: dict[str, Any]) -> str:
        """The type of an item the fast path refused (a checksum mismatch) from its
        inspected value; the record's name where that value does not convert."""
        try:
            value = inspect_walk._value(self.mod, self.fam, record, node, self.stream, pos,
                                        end, args)
        except Exception:  # noqa: BLE001 - only the label depends on it
            return record
        return self.typer(value, record)

    def plan(self, plan: tuple, pos: int, params: dict[str, Any], path: str,
             depth: int) -> int:
        """Walk a record by its plan (``inspect_walk``'s, decoded by the fast path)."""
        defaults, fields = plan
        env = {**defaults, **params}
        for name, mode, target, cond, arg_src, sub in fields:
            here = f"{path}.{name}"
            if cond is not None and not eval_expr(cond, env):
                env[name] = None
                self.parts.append(Part(here, pos, pos, depth, text="None"))
                continue
            args = {k: eval_expr(src, env) for k, src in arg_src}
            if mode == "whole":
                env[name], pos = self.whole(pos, target, args, here, depth)
            elif mode == "stream":
                part = Part(here, pos, depth=depth)
                self.parts.append(part)
                pos = part.end = self.plan(sub, pos, args, here, depth + 1)
                env[name] = None
            elif pos >= self.size:
                self.parts.append(Part(here, pos, pos, depth, text="[]"))
                env[name] = None
            else:
                pos = self.items(pos, self.size, target, args, here, depth)
                env[name] = None
        return pos


def summarize(stream: BinaryIO, size: int, mod: Any, fam: ir.Family, record: str,
              params: dict[str, Any], *, plan: tuple | None = None, repeat: bool = False,
              then: str | None = None, how: str = "",
              progress: Callable[[int], None] | None = None) -> Summary:
    """The summary of ``stream`` (``size`` bytes) read as ``record`` by ``plan``, or as a
    run of ``record`` (``repeat``), or one ``record`` then a run of ``then``."""
    params = inspector.coerce_params(mod, fam, record, params)
    result = inspector.Result(fam.name, record, how, size, [])
    buf, mm = _buffer(stream)
    s = _Summarizer(buf, size, stream, mod, fam, result, progress,
                    releaser(mm) if mm is not None else None)
    checks, s.logs = _reachable(fam, then or record)
    if then is not None:
        checks = checks or _reachable(fam, record)[0]
    try:
        if plan is not None:
            part = Part(record, 0, depth=0)
            s.parts.append(part)
            part.end = s.plan(plan, 0, params, record, 1)
        elif then is not None:
            _, pos = s.whole(0, record, params, f"{record}[0]", 0)
            s.items(pos, size, then, inspector.coerce_params(mod, fam, then, {}), then, 0,
                    first=1)
        else:
            s.items(0, size, record, params, record, 0)
    except _Stop:
        pass
    finally:
        s.buf = buf = None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a decoded value still holds a view: the collector unmaps it
    end = next((p.end for p in s.parts if p.depth == 0), None)
    if result.failure is None and plan is not None and end is not None and end < size:
        result.notes.append(f"bytes {end}..{size} follow {record} and are not part of it "
                            "(not decoded)")
    result.count = s.records
    if progress is not None:
        progress(size)
    return Summary(result, s.parts, s.records, checks)


def _buffer(stream: BinaryIO) -> tuple[Any, mmap.mmap | None]:
    """The input's bytes without reading them: a map of a file, a view of an in-memory
    stream, else the bytes read."""
    if isinstance(stream, io.BytesIO):
        return stream.getvalue(), None
    buf, mm = inspector.mapped(stream)
    if buf is not None:
        return buf, mm
    here = stream.tell()
    stream.seek(0)
    data = stream.read()
    stream.seek(here)
    return data, None


def render(summary: Summary) -> str:
    """The summary as text: one line per part (lists with their items by type), then
    the same closing lines as the listing."""
    res = summary.result
    lines = [f"{'offset':>8} {'size':>9}  part (--list shows every record and field)"]
    for p in summary.parts:
        size = "" if p.end is None else str(p.end - p.offset)
        pad = "  " * p.depth
        if p.text is not None:
            lines.append(f"{p.offset:>8} {size:>9}  {pad}{p.path} = {p.text}")
        elif p.items is not None:
            lines.append(f"{p.offset:>8} {size:>9}  {pad}{p.path}: {p.items} {p.record}"
                         + (f", first at {p.first}, last at {p.last}" if p.items else ""))
            for label, n in sorted(p.types.items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"{'':>8} {'':>9}  {pad}  {n:>9}  {label}")
        else:
            inner = ", ".join(f"{k}: {v} items" for k, v in p.inner.items())
            lines.append(f"{p.offset:>8} {size:>9}  {pad}{p.path}"
                         + (f" ({inner})" if inner else ""))
    tail = inspector.render_tail(res).splitlines()
    if res.ok and tail and tail[-1].startswith("ok: "):
        what = "every checksum verified" if summary.checksums else "no checksum to verify"
        if res.stops:
            what += " (a log ends early: see the note)"
        tail[-1] = f"ok: {summary.records} record(s) and item(s), {what}"
    return "\n".join(lines + tail) + "\n"


@dataclasses.dataclass
class Way:
    """How a target is summarised: its params, and its walking plan (None: a run of
    records)."""

    params: dict[str, Any]
    plan: tuple | None


def plan_of(target: inspector.Target, params: dict[str, Any]) -> Way | None:
    """How ``target`` is summarised, or None when it is listed (a single record, or a
    big record whose parts cannot be walked one at a time)."""
    given = {**target.params, **params}
    if target.repeat or target.then is not None:
        return Way(given, None)
    plan = stream_plan(target.family, target.record)
    if plan is not None and inspect_walk.walkable(plan, set(given)):
        return Way(given, plan)
    return None


def run_target(stream: BinaryIO, size: int, target: inspector.Target,
               modules: Callable[[str], Any], way: Way,
               progress: Callable[[int], None] | None = None) -> Summary:
    mod = modules(target.family.name)
    return summarize(stream, size, mod, target.family, target.record, way.params,
                     plan=way.plan, repeat=target.repeat, then=target.then, how=target.how,
                     progress=progress)


def render_output(summary: Summary, target: inspector.Target, size: int,
                  machine: bool) -> str:
    """What ``inspect`` prints: the JSON document, or the head line and the text."""
    if machine:
        return json.dumps(summary.as_dict(), indent=2, default=str) + "\n"
    return (inspector.render_head(target.family.name, target.record, target.how, size)
            .splitlines()[0] + "\n" + render(summary))
