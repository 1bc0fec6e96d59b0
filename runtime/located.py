"""Random access: records found at an offset, relative to another structure, or by
searching back from the end of the buffer (schema key ``at:``).

A located field takes no bytes in its record's sequential layout. Decoding gives a
:class:`Lazy` value (or a :class:`LazyList` for one record per item of a list of offsets)
that decodes the record on first use, through the same codec path that decoded its holder,
and caches it; errors then carry the absolute offset in the caller's buffer and the field
path from the outermost record. Encoding writes the sequential content first, then places
each located structure (at the offset its value asks for, else after what is already
written; structures found from the end last) and fills the fields that say where they are,
how many items they hold and how many bytes they take.

Both codec paths run through :class:`Codecs`, built by the generated module from its own
per-record readers and writers, so the fast path and the Construct path (interpreted or
compiled) each decode and encode the located records themselves.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from .errors import ConstraintError, DecodeError, EncodeError, TruncatedError

Expr = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class Item:
    """One located field of a record, as the generated module describes it."""

    name: str
    target: str  # the record found there
    how: str  # "at" | "find_last" | "from_end" | "each"
    where: Expr | None = None  # at: the offset; from_end: the distance from the end
    base: str | None = None  # at: "_start" (the record's start) or a located field
    shift: int = 0  # added to the record's start (a base field at a fixed offset)
    signature: bytes = b""  # find_last
    within: int = 0  # find_last: the signature starts within the last N bytes
    each: str | None = None  # each: the list field whose items hold the offsets
    count: Expr | None = None  # a run of records: how many
    eos: bool = False  # a run of records filling ``size`` bytes
    size: Expr | None = None  # the bytes the structure takes (a bound and a check)
    lazy: bool = True
    cond: Expr | None = None  # present only when true
    # fields the encoder fills: (kind, path); kind is offset|count|size|distance,
    # a path item "*" stands for every item of a list (``each``)
    fills: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def from_end(self) -> bool:
        return self.how in ("find_last", "from_end")

    @property
    def many(self) -> bool:
        return self.count is not None or self.eos


class Lazy:
    """A located record: decoded on first use (attribute access, ``get()``, comparison)
    and cached. ``offset`` is where it lies, from the start of the outermost record."""

    __slots__ = ("_load", "_value", "_done", "offset")

    def __init__(self, load: Callable[[], Any] | None, offset: int | None = None) -> None:
        self._load = load
        self._value: Any = None
        self._done = False
        self.offset = offset

    def get(self) -> Any:
        if not self._done:
            self._value = self._load()
            self._done = True
            self._load = None
        return self._value

    @property
    def loaded(self) -> bool:
        return self._done

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.get(), name)

    def __eq__(self, other: object) -> bool:
        return self.get() == (other.get() if isinstance(other, Lazy) else other)

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        return len(self.get())

    def __iter__(self):
        return iter(self.get())

    def __getitem__(self, index: Any) -> Any:
        return self.get()[index]

    def __deepcopy__(self, memo: dict) -> Located:
        return Located(copy.deepcopy(self.get(), memo), self.offset)

    def __repr__(self) -> str:
        at = "" if self.offset is None else f" @{self.offset}"
        return f"Lazy({self._value!r}{at})" if self._done else f"Lazy(<not read>{at})"


class Located(Lazy):
    """A value placed at ``offset`` (from the start of the outermost record) on encode:
    ``Located(record, offset=4096)``. Decoded values remember their offsets the same way,
    so a file re-encodes with every structure where it was."""

    __slots__ = ()

    def __init__(self, value: Any, offset: int | None = None) -> None:
        super().__init__(None, offset)
        self._value = value
        self._done = True


class LazyList(Sequence):
    """One located record per item of a list of offsets; each decoded on first use."""

    def __init__(self, loads: list[Callable[[], Any]], offsets: list[int | None]) -> None:
        self._loads = loads
        self._cache: dict[int, Any] = {}
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self._loads)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index not in self._cache:
            self._cache[index] = self._loads[index]()
        return self._cache[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, LazyList)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __deepcopy__(self, memo: dict) -> list:
        return [Located(copy.deepcopy(v, memo), o) for v, o in zip(self, self.offsets, strict=True)]

    def __repr__(self) -> str:
        return f"LazyList({len(self)} records at {self.offsets!r})"


def _rebase(exc: DecodeError, record: str, path: str) -> DecodeError:
    """An error of a located record's decoder (path from the record's name) re-rooted at
    the located field's path."""
    p = exc.path or ""
    if p == record:
        p = ""
    elif p.startswith(record + ".") or p.startswith(record + "["):
        p = p[len(record):].lstrip(".")
    exc.path = path if not p else (path + p if p.startswith("[") else f"{path}.{p}")
    return exc


@dataclasses.dataclass
class _Reader:
    """One decode: the caller's buffer, the outermost record's start and the path."""

    buf: Any
    origin: int
    construct: bool
    compiled: bool
    # structures being decoded right now: one reached again through its own offsets
    # (a cycle) is refused instead of recursing forever
    active: set = dataclasses.field(default_factory=set)


class Codecs:
    """The located fields of a generated module, and its per-record codecs:
    ``fast[name] = (decode(buf, pos) -> (value, end), encode(value) -> bytes)``,
    ``construct[name] = (decode(buf, pos, compiled) -> (value, end), encode(value,
    compiled) -> bytes)``. Only sequential content goes through these; located fields
    are added here."""

    def __init__(self, items: dict[str, tuple[Item, ...]],
                 fast: dict[str, tuple[Callable, Callable]],
                 construct: dict[str, tuple[Callable, Callable]]) -> None:
        self.items = items
        self.fast = fast
        self.construct = construct

    # -- decode ---------------------------------------------------------------------

    def decode(self, name: str, buf: Any, offset: int = 0, *, construct: bool = False,
               compiled: bool = False) -> tuple[Any, int]:
        """The record ``name`` at ``offset`` (its located fields attached); ``end`` is
        where its sequential content ends."""
        rd = _Reader(buf if construct or buf.__class__ is bytes
                     or isinstance(buf, memoryview) else memoryview(buf),
                     offset, construct, compiled)
        # the record's structures lie anywhere in the buffer: it ends where the buffer does
        return self._read(rd, name, offset, None, name)[0], len(rd.buf)

    def _read(self, rd: _Reader, name: str, pos: int, limit: int | None,
              path: str) -> tuple[Any, int]:
        buf = rd.buf if limit is None else rd.buf[:limit]
        try:
            if rd.construct:
                value, end = self.construct[name][0](buf, pos, rd.compiled)
            else:
                value, end = self.fast[name][0](buf, pos)
        except DecodeError as exc:
            raise _rebase(exc, name, path) from None
        for item in self.items.get(name, ()):
            setattr(value, item.name, self._attach(rd, item, value, pos, f"{path}.{item.name}"))
        return value, end

    def _attach(self, rd: _Reader, item: Item, holder: Any, start: int, path: str) -> Any:
        if item.cond is not None and not _eval(item.cond, holder, path, start, bool):
            return None
        if item.how == "each":
            offsets = [self._position(rd, item, holder, start, path, sub=x)
                       for x in getattr(holder, item.each)]
            loads = [self._loader(rd, item, holder, p, f"{path}[{i}]")
                     for i, p in enumerate(offsets)]
            if not item.lazy:
                values = [load() for load in loads]
                loads = [(lambda v=v: v) for v in values]
            return LazyList(loads, [p - rd.origin for p in offsets])
        pos = self._position(rd, item, holder, start, path)
        lazy = Lazy(self._loader(rd, item, holder, pos, path), pos - rd.origin)
        if not item.lazy:
            lazy.get()
        return lazy

    def _loader(self, rd: _Reader, item: Item, holder: Any, pos: int,
                path: str) -> Callable[[], Any]:
        def load() -> Any:
            key = (item.target, pos)
            if key in rd.active:
                raise ConstraintError("located structures form a cycle", offset=pos,
                                      path=path, expected="each structure once",
                                      found=f"{item.target} again at {pos}")
            rd.active.add(key)
            try:
                return read()
            finally:
                rd.active.discard(key)

        def read() -> Any:
            limit = None
            if item.size is not None:
                size = _eval(item.size, holder, path, pos)
                limit = pos + size
                if size < 0 or limit > len(rd.buf):
                    raise TruncatedError("located structure runs past the end of the buffer",
                                         offset=pos, path=path, expected=size,
                                         found=len(rd.buf) - pos)
            if item.target == "bytes":  # raw bytes: as they are
                return bytes(rd.buf[pos:limit])
            if not item.many:
                value, end = self._read(rd, item.target, pos, limit, path)
                if limit is not None and end != limit:
                    raise ConstraintError("located structure does not fill its size",
                                          offset=end, path=path, expected=limit - pos,
                                          found=end - pos)
                return value
            out: list[Any] = []
            p = pos
            n = _eval(item.count, holder, path, pos) if item.count is not None else None
            while (len(out) < n) if n is not None else (p < limit):
                value, nxt = self._read(rd, item.target, p, limit, f"{path}[{len(out)}]")
                if nxt <= p:  # a record of no bytes would repeat forever
                    raise ConstraintError("record consumes no bytes", offset=p,
                                          path=f"{path}[{len(out)}]", expected="> 0 bytes",
                                          found=0)
                out.append(value)
                p = nxt
            if limit is not None and p != limit:
                raise ConstraintError("located records do not fill their size", offset=p,
                                      path=path, expected=limit - pos, found=p - pos)
            return out
        return load

    def _position(self, rd: _Reader, item: Item, holder: Any, start: int, path: str,
                  sub: Any = None) -> int:
        size = len(rd.buf)
        if item.how == "find_last":
            lo = max(rd.origin, size - item.within)
            hit = bytes(rd.buf[lo:size]).rfind(item.signature)
            if hit < 0:
                raise ConstraintError(
                    f"signature {item.signature.hex()} not found within the last "
                    f"{item.within} bytes", offset=lo, path=path,
                    expected=item.signature.hex(), found="no match")
            return lo + hit
        if item.how == "each":
            pos = rd.origin + _eval(item.where, sub, path, start)
        elif item.how == "from_end":
            pos = size - _eval(item.where, holder, path, start)
        else:
            base = rd.origin
            if item.base == "_start":
                base = start + item.shift
            elif item.base is not None:
                base = rd.origin + getattr(holder, item.base).offset
            pos = base + _eval(item.where, holder, path, start)
        if not rd.origin <= pos <= size:
            raise ConstraintError("offset out of range", offset=pos, path=path,
                                  expected=f"{rd.origin}..{size}", found=pos)
        return pos

    # -- encode ---------------------------------------------------------------------

    def encode(self, name: str, value: Any, *, construct: bool = False,
               compiled: bool = False) -> bytes:
        """The record ``name`` with its located structures placed and their offset,
        count and size fields filled."""
        def write(rec: str, v: Any, path: str) -> bytes:
            try:
                if construct:
                    return self.construct[rec][1](v, compiled)
                return self.fast[rec][1](v)
            except EncodeError as exc:
                raise _rebase_encode(exc, rec, path) from None

        pieces = self._write(name, value, 0, write, name)
        total = max((p + len(b) for p, b, _ in pieces), default=0)
        out = bytearray(total)  # gaps between placed structures are zero
        for p, b, _ in pieces:
            out[p:p + len(b)] = b
        return bytes(out)

    def _write(self, name: str, value: Any, start: int, write: Callable,
               path: str) -> list[tuple[int, bytes, str]]:
        """``(position, bytes, path)`` pieces of the record ``name`` written at ``start``:
        its sequential bytes first, then every located structure (nested ones too)."""
        items = self.items.get(name, ())
        if not items:
            return [(start, write(name, _unwrap(value), path), path)]
        work = copy.copy(_unwrap(value))
        hints: dict[tuple[str, int], int | None] = {}
        absent = set()
        for item in items:  # the located values, owned (the encoder fills them)
            raw = getattr(work, item.name, None)
            if raw is None and item.cond is not None:
                absent.add(item.name)  # presence is the value's; checked once filled
                continue
            if raw is None:
                raise EncodeError("a located structure is missing", path=f"{path}.{item.name}")
            if item.how == "each":
                vals = list(raw)
                offs = (list(raw.offsets) if isinstance(raw, LazyList) else
                        [x.offset if isinstance(x, Lazy) else None for x in vals])
                for i, o in enumerate(offs):
                    hints[(item.name, i)] = o
                setattr(work, item.name, [copy.deepcopy(_unwrap(x)) for x in vals])
            else:
                hints[(item.name, 0)] = raw.offset if isinstance(raw, Lazy) else None
                raw = _unwrap(raw)
                setattr(work, item.name, [copy.deepcopy(_unwrap(x)) for x in raw]
                        if item.many else copy.deepcopy(raw))
        for item in items:
            for _kind, fpath in item.fills:
                _own(work, fpath)
        items = tuple(i for i in items if i.name not in absent)
        for item in self.items[name]:
            if item.name in absent:  # no structure: where it would be reads 0
                for _kind, fpath in item.fills:
                    _set(work, fpath, 0)
        placed: dict[tuple[str, int], int] = {}
        filled: list[Any] = []
        for round_ in range(8):  # sizes settle once the filled values are in
            seq = write(name, work, path)
            units = self._units(items, work, placed, write, path)
            layout = self._place(items, work, units, hints, start, len(seq))
            now = self._fill(items, work, units, layout, start)
            if round_ and layout == placed and now == filled:
                break
            placed, filled = layout, now
        else:
            raise EncodeError("located structures do not settle (their offsets change "
                              "their sizes)", path=path)
        pieces = [(start, seq, path)]
        for key in layout:
            at, _n, got = units[key]
            pieces += [(p + layout[key] - at, b, lbl) for p, b, lbl in got]
        spans = sorted((p, p + len(b), lbl) for p, b, lbl in pieces if b)
        for (a0, a1, la), (b0, b1, lb) in zip(spans, spans[1:], strict=False):
            if b0 < a1:
                raise EncodeError(f"overlapping placement: {lb} at [{b0}, {b1}) overlaps "
                                  f"{la} at [{a0}, {a1})", path=lb)
        for item in items:  # a count or size the encoder checks but cannot fill
            kinds = {k for k, _ in item.fills}
            key = (item.name, 0)
            if item.size is not None and "size" not in kinds and key in units \
                    and int(item.size(work)) != units[key][1]:
                raise EncodeError(f"size {int(item.size(work))} says otherwise: the structure "
                                  f"takes {units[key][1]} bytes", path=f"{path}.{item.name}")
            if item.count is not None and "count" not in kinds \
                    and int(item.count(work)) != len(getattr(work, item.name)):
                raise EncodeError(f"count {int(item.count(work))} says otherwise: "
                                  f"{len(getattr(work, item.name))} records",
                                  path=f"{path}.{item.name}")
        if start == 0:
            self._check_ends(items, work, layout, pieces, path)
        for item in self.items[name]:
            if item.cond is not None and bool(item.cond(work)) == (item.name in absent):
                raise EncodeError("the structure's presence disagrees with its condition",
                                  path=f"{path}.{item.name}")
        return pieces

    def _units(self, items: tuple[Item, ...], work: Any, placed: dict, write: Callable,
               path: str) -> dict:
        """Each located structure written at its previous position (0 the first time):
        ``{(field, index): (position, its own length, pieces)}``."""
        units: dict[tuple[str, int], tuple[int, int, list]] = {}
        for item in items:
            val = getattr(work, item.name)
            for i, v in enumerate(val if item.how == "each" else [val]):
                at = placed.get((item.name, i), 0)
                sub = f"{path}.{item.name}" + (f"[{i}]" if item.how == "each" else "")
                if item.many:
                    pieces: list = []
                    p = at
                    for j, x in enumerate(v):
                        got = self._write(item.target, x, p, write, f"{sub}[{j}]")
                        pieces += got
                        p += len(got[0][1])
                    units[(item.name, i)] = (at, p - at, pieces)
                elif item.target == "bytes":
                    if not isinstance(v, (bytes, bytearray, memoryview)):
                        raise EncodeError(f"located bytes, not {type(v).__name__}", path=sub)
                    units[(item.name, i)] = (at, len(v), [(at, bytes(v), sub)])
                else:
                    got = self._write(item.target, v, at, write, sub)
                    units[(item.name, i)] = (at, len(got[0][1]), got)
        return units

    def _place(self, items: tuple[Item, ...], work: Any, units: dict, hints: dict,
               start: int, seq_len: int) -> dict:
        """Where each structure goes: offsets the value asks for first (a decoded value's
        own, or an ``at`` the encoder cannot fill), then the rest after everything placed,
        the last declared first: a structure is found through those declared before it,
        which formats write after it (ZIP's members, then its central directory, then its
        end record). Structures found from the end come last, the first declared last."""
        def extent(key: tuple[str, int]) -> int:
            at, n, pieces = units[key]
            return max([at + n] + [p + len(b) for p, b, _ in pieces]) - at

        layout: dict[tuple[str, int], int] = {}
        for key, hint in hints.items():
            if hint is not None:
                layout[key] = hint
        for item in items:
            key = (item.name, 0)
            if item.how == "at" and key not in layout and \
                    not any(k == "offset" for k, _ in item.fills):
                base = 0 if item.base is None else start + item.shift \
                    if item.base == "_start" else layout.get((item.base, 0))
                if base is not None:
                    layout[key] = base + int(item.where(work))
        cursor = max([start + seq_len] + [layout[k] + extent(k) for k in layout])
        order = [i for i in reversed(items) if not i.from_end] + \
            [i for i in reversed(items) if i.from_end]
        for item in order:
            for key in units:
                if key[0] == item.name and key not in layout:
                    layout[key] = cursor
                    cursor += extent(key)
        return layout

    def _fill(self, items: tuple[Item, ...], work: Any, units: dict, layout: dict,
              start: int) -> list[Any]:
        """Set the fields saying where the structures are, how many records and how many
        bytes they hold; the values set, in order."""
        total = max(layout[k] + units[k][1] for k in layout) if layout else start
        done: list[Any] = []
        for item in items:
            for kind, fpath in item.fills:
                if kind == "offset" and item.how == "each":
                    holders = getattr(work, item.each)
                    for i, h in enumerate(holders):
                        setattr(_unwrap(h), fpath[-1], layout[(item.name, i)])
                        done.append(layout[(item.name, i)])
                    continue
                key = (item.name, 0)
                if kind == "offset":
                    base = 0 if item.base is None else start + item.shift \
                        if item.base == "_start" else layout[(item.base, 0)]
                    val = layout[key] - base
                elif kind == "distance":
                    val = max(total, layout[key] + units[key][1]) - layout[key]
                elif kind == "count":
                    val = len(getattr(work, item.name))
                else:
                    val = units[key][1]
                _set(work, fpath, val)
                done.append(val)
        return done

    def _check_ends(self, items: tuple[Item, ...], work: Any, layout: dict,
                    pieces: list, path: str) -> None:
        """Structures found from the end must be found there in the bytes written."""
        total = max(p + len(b) for p, b, _ in pieces)
        for item in items:
            key = (item.name, 0)
            if item.how == "from_end":
                want = total - int(item.where(work))
            elif item.how == "find_last":
                data = bytearray(total)
                for p, b, _ in pieces:
                    data[p:p + len(b)] = b
                lo = max(0, total - item.within)
                hit = bytes(data[lo:]).rfind(item.signature)
                want = lo + hit if hit >= 0 else None
            else:
                continue
            if want != layout[key]:
                raise EncodeError(f"placed at {layout[key]}, but found from the end at "
                                  f"{want}", path=f"{path}.{item.name}")


def _rebase_encode(exc: EncodeError, record: str, path: str) -> EncodeError:
    """An encoder's error (path from the record's name) re-rooted at ``path``."""
    p = exc.path or ""
    if p == record:
        p = ""
    elif p.startswith(record + ".") or p.startswith(record + "["):
        p = p[len(record):].lstrip(".")
    full = path if not p else (path + p if p.startswith("[") else f"{path}.{p}")
    return EncodeError(exc.message, path=full)


def _eval(expr: Expr | None, holder: Any, path: str, at: int, kind: type = int) -> Any:
    try:
        out = expr(holder)  # type: ignore[misc]
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 -- an expression over a value that lacks a name
        raise ConstraintError(f"cannot evaluate the location: {exc}", offset=at,
                              path=path) from None
    if kind is bool:
        return bool(out)
    if isinstance(out, bool) or not isinstance(out, int):
        raise ConstraintError("a location is not an integer", offset=at, path=path,
                              expected="int", found=out)
    return out


def _unwrap(v: Any) -> Any:
    return v.get() if isinstance(v, Lazy) else v


def _own(obj: Any, path: tuple[str, ...]) -> None:
    """Copy the values along ``path`` (not its last name) so filling them changes no
    value the caller holds."""
    for i, name in enumerate(path[:-1]):
        child = getattr(obj, name)
        if path[i + 1] == "*":
            setattr(obj, name, [copy.copy(_unwrap(x)) for x in child])
            return
        child = copy.copy(_unwrap(child))
        setattr(obj, name, child)
        obj = child


def _set(obj: Any, path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        obj = _unwrap(getattr(obj, name))
    setattr(obj, path[-1], value)
