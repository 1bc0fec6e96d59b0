"""Framing layers: logical records carried in physical fragments (``framing:``).

Two carriers are supported, on both codec paths:

- **blocks**: the field's bytes are cut into fixed-size blocks (counted from the field's
  first byte); each block holds fragments (header + piece) marked full, first, middle or
  last; a block tail shorter than a fragment header is padding. Encode follows the
  LevelDB/RocksDB log writer exactly, so it is deterministic.
- **lacing**: the field is a run of pages; a page's lacing table (u8 values, 255 = the
  packet goes on) splits its piece into packet pieces, and a flag says its first piece
  continues the previous page's packet. Encode keeps the pages (their header fields and
  how many lacing values each holds) and derives the lacing values, the pieces and the
  continued flag from the packets.

A framed field decodes to a :class:`FramedList`: the logical records, with the physical
fragments in ``.fragments``. Errors carry offsets in the *physical* buffer: an error
inside a logical record is mapped back through the pieces it was reassembled from.
"""

from __future__ import annotations

import dataclasses
import io as _io
import re
from collections.abc import Callable
from typing import Any

import construct as cs

from .construct_support import construct_error
from .errors import ConstraintError, DecodeError, EncodeError, TruncatedError
from .truth import encode_failure

CONTINUES = 255  # a lacing value that does not end its packet


class FramedList(list):
    """The logical records of a framed field; ``fragments`` are the physical fragments
    (records of the fragment type) they were carried in, in file order. Two framed lists
    compare their fragments too; against a plain list only the records count."""

    __slots__ = ("fragments",)

    def __init__(self, items: Any = (), fragments: Any = None) -> None:
        super().__init__(items)
        self.fragments = list(fragments) if fragments is not None else None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FramedList) and self.fragments is not None \
                and other.fragments is not None:
            return list.__eq__(self, other) and self.fragments == other.fragments
        return list.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FramedList({list.__repr__(self)}, fragments={self.fragments!r})"


@dataclasses.dataclass
class Spec:
    """One framed field, as the generated module describes it."""

    piece: str
    fragment: type  # the fragment record's class (its encoder takes one)
    block_size: int | None = None
    tail: str = "zero"
    kind: str | None = None
    kinds: tuple[int, int, int, int] = (0, 0, 0, 0)  # full, first, middle, last
    kind_cls: Any = None  # the kind field's enum class (None: plain integers)
    header: int = 0
    after_piece: int = 0
    lacing: str | None = None
    continued: Callable[[Any], Any] | None = None
    continued_at: tuple[str, ...] | None = None  # where a stored continued flag sits
    # the Construct path's conversions (set once the module's converters exist)
    frag_from_construct: Callable[[Any], Any] | None = None
    frag_to_construct: Callable[[Any], Any] | None = None
    item_from_construct: Callable[[Any], Any] | None = None


# -- offsets: logical -> physical --------------------------------------------------------

def physical(pieces: list[tuple[int, int]], at: int) -> int:
    """The physical offset of byte ``at`` of a logical record reassembled from
    ``pieces`` (``(physical start, length)`` in order); its end maps to the end of the
    last piece."""
    lo = 0
    for start, n in pieces:
        if at < lo + n:
            return start + (at - lo)
        lo += n
    start, n = pieces[-1]
    return start + n + (at - lo)


def _placed(exc: DecodeError, offset: int | None, prefix: str) -> DecodeError:
    exc.offset = offset
    exc.path = prefix + ("." + exc.path if exc.path and not exc.path.startswith("[")
                         else exc.path)
    return exc


# -- decode (both paths) -----------------------------------------------------------------

def decode(spec: Spec, data: Any, pos: int, end: int,
           read_fragment: Callable[[int, int], tuple[Any, int]],
           read_record: Callable[[bytes], tuple[Any, int]],
           origin: int = 0) -> tuple[FramedList, int]:
    """The records of a framed field from offsets ``pos`` to ``end``, ``data[0]`` being
    offset ``origin``. ``read_fragment(p, limit)`` decodes one fragment (offsets
    absolute, path relative); ``read_record(raw)`` decodes one logical record from its
    reassembled bytes (offsets relative to ``raw``)."""
    if spec.block_size is not None:
        return _decode_blocks(spec, data, pos, end, read_fragment, read_record, origin)
    return _decode_pages(spec, data, pos, end, read_fragment, read_record)


def _record(read_record: Callable, raw: bytes, pieces: list, index: int) -> Any:
    try:
        value, used = read_record(raw)
    except DecodeError as exc:
        at = exc.offset if exc.offset is not None else 0
        raise _placed(exc, physical(pieces, at), f"[{index}]") from None
    if used != len(raw):
        raise ConstraintError("logical record has trailing bytes", offset=physical(pieces, used),
                              path=f"[{index}]", expected=len(raw), found=used)
    return value


def _fragment(read_fragment: Callable, p: int, limit: int, k: int) -> tuple[Any, int]:
    try:
        frag, nxt = read_fragment(p, limit)
    except DecodeError as exc:
        raise _placed(exc, exc.offset if exc.offset is not None else p,
                      f"fragments[{k}]") from None
    if nxt <= p:  # an empty fragment would repeat forever: refuse instead of hanging
        raise ConstraintError("fragment consumes no bytes", offset=p, path=f"fragments[{k}]",
                              expected="> 0 bytes", found=0)
    return frag, nxt


def _decode_blocks(spec: Spec, data: Any, pos: int, end: int, read_fragment: Callable,
                   read_record: Callable, origin: int) -> tuple[FramedList, int]:
    full, first, middle, last = spec.kinds
    size, header = spec.block_size, spec.header
    base = pos
    items: list = []
    frags: list = []
    open_: list[tuple[bytes, int, int]] | None = None  # (piece, start, length) of a record
    open_at = pos
    while pos < end:
        block_end = base + ((pos - base) // size + 1) * size
        if block_end - pos < header:  # a tail too short for a fragment: padding
            stop = min(block_end, end)
            if spec.tail == "zero":
                for i in range(pos, stop):
                    if data[i - origin]:
                        raise ConstraintError("block tail is not zero padding", offset=i,
                                              path="", expected=0, found=data[i - origin])
            pos = stop
            continue
        k = len(frags)
        frag, nxt = _fragment(read_fragment, pos, min(block_end, end), k)
        frags.append(frag)
        piece = getattr(frag, spec.piece)
        at = nxt - spec.after_piece - len(piece)
        kind = int(getattr(frag, spec.kind))
        if kind == full or kind == first:
            if open_ is not None:
                raise ConstraintError(f"fragment {k} starts a record while record "
                                      f"{len(items)} waits for its last fragment",
                                      offset=pos, path=f"fragments[{k}]",
                                      expected="middle or last", found=kind)
            open_, open_at = [(piece, at, len(piece))], pos
        elif kind == middle or kind == last:
            if open_ is None:
                raise ConstraintError(f"fragment {k} continues a record that no first "
                                      "fragment started", offset=pos, path=f"fragments[{k}]",
                                      expected="full or first", found=kind)
            open_.append((piece, at, len(piece)))
        else:
            raise ConstraintError(f"fragment {k} has kind {kind}, not full, first, middle or "
                                  "last", offset=pos, path=f"fragments[{k}].{spec.kind}",
                                  expected=list(spec.kinds), found=kind)
        if kind == full or kind == last:
            raw = b"".join(bytes(p) for p, _, _ in open_)
            items.append(_record(read_record, raw, [(a, n) for _, a, n in open_], len(items)))
            open_ = None
        pos = nxt
    if open_ is not None:
        raise TruncatedError(f"the data ends inside record {len(items)} (a first fragment "
                             "without its last)", offset=end, path=f"[{len(items)}]",
                             expected="a last fragment", found=open_at)
    return FramedList(items, frags), pos


def _decode_pages(spec: Spec, data: Any, pos: int, end: int, read_fragment: Callable,
                  read_record: Callable) -> tuple[FramedList, int]:
    items: list = []
    frags: list = []
    open_: list[tuple[bytes, int]] | None = None  # (physical start, length) pieces
    chunks: list[bytes] = []
    while pos < end:
        k = len(frags)
        frag, nxt = _fragment(read_fragment, pos, end, k)
        frags.append(frag)
        piece = bytes(getattr(frag, spec.piece))
        lacing = list(getattr(frag, spec.lacing))
        at = nxt - spec.after_piece - len(piece)
        if sum(lacing) != len(piece):
            raise ConstraintError(f"the lacing table sums to {sum(lacing)} bytes, the piece "
                                  f"holds {len(piece)}", offset=at,
                                  path=f"fragments[{k}].{spec.piece}",
                                  expected=sum(lacing), found=len(piece))
        cont = bool(spec.continued(frag))
        if cont and open_ is None:
            raise ConstraintError(f"page {k} continues a packet but none is open", offset=pos,
                                  path=f"fragments[{k}]", expected=False, found=True)
        if not cont and open_ is not None:
            raise ConstraintError(f"page {k} does not continue packet {len(items)}, which "
                                  "the previous page left open", offset=pos,
                                  path=f"fragments[{k}]", expected=True, found=False)
        off = 0
        for n in lacing:
            if open_ is None:
                open_, chunks = [], []
            open_.append((at + off, n))
            chunks.append(piece[off:off + n])
            off += n
            if n < CONTINUES:
                items.append(_record(read_record, b"".join(chunks), open_, len(items)))
                open_ = None
        pos = nxt
    if open_ is not None:
        raise TruncatedError(f"the data ends inside packet {len(items)} (its last lacing "
                             "value is 255)", offset=end, path=f"[{len(items)}]",
                             expected="a lacing value below 255", found=CONTINUES)
    return FramedList(items, frags), pos


# -- encode (both paths) -----------------------------------------------------------------

def encode(spec: Spec, items: Any, start: int, write_record: Callable[[Any], bytes],
           write_fragment: Callable[[Any], None], tell: Callable[[], int],
           pad: Callable[[int], None]) -> None:
    """Write the records ``items`` framed: ``write_record(item)`` gives a record's bytes,
    ``write_fragment(frag)`` writes one fragment object, ``tell()`` is the write position
    and ``pad(n)`` writes ``n`` zero bytes; blocks count from ``start``."""
    raws = []
    for i, item in enumerate(items):
        try:
            raws.append(write_record(item))
        except Exception as exc:  # noqa: BLE001 -- every failure is the item's EncodeError
            err = encode_failure(exc, "_")
            raise EncodeError(err.message, path=f"[{i}]" + err.path[1:]) from None
    if spec.block_size is not None:
        for frag in blocks(spec, raws, lambda: tell() - start, pad):
            write_fragment(frag)
        return
    for frag in pages(spec, raws, getattr(items, "fragments", None)):
        write_fragment(frag)


def _kind(spec: Spec, value: int) -> Any:
    return spec.kind_cls(value) if spec.kind_cls is not None else value


def blocks(spec: Spec, raws: list[bytes], where: Callable[[], int],
           pad: Callable[[int], None]):
    """The fragments of ``raws`` as the LevelDB/RocksDB log writer cuts them (zero padding
    is written through ``pad`` before the fragment it precedes is yielded)."""
    full, first, middle, last = spec.kinds
    size, header = spec.block_size, spec.header
    for raw in raws:
        left, begin = memoryview(raw), True
        while True:
            leftover = size - where() % size
            if leftover < header:
                pad(leftover)
            avail = size - where() % size - header
            n = min(len(left), avail)
            done = n == len(left)
            kind = (full if done else first) if begin else (last if done else middle)
            yield spec.fragment(**{spec.kind: _kind(spec, kind), spec.piece: bytes(left[:n])})
            left, begin = left[n:], False
            if done:
                break


def pages(spec: Spec, raws: list[bytes], kept: Any) -> list:
    """The pages of ``raws``: each kept page with its lacing values, piece and continued
    flag derived from the packets; the page keeps its other fields and how many lacing
    values it holds. A kept structure that does not fit the packets is an EncodeError."""
    if kept is None:
        raise EncodeError("lacing framing keeps its pages: give the records as a FramedList "
                          "whose fragments are the pages (as decoded)", path="fragments")
    segs: list[tuple[int, bytes]] = []
    for raw in raws:
        n = len(raw)
        for off in range(0, n - n % CONTINUES, CONTINUES):
            segs.append((CONTINUES, raw[off:off + CONTINUES]))
        segs.append((n % CONTINUES, raw[n - n % CONTINUES:]))
    need = sum(len(getattr(p, spec.lacing)) for p in kept)
    if need != len(segs):
        raise EncodeError(f"the kept pages hold {need} lacing values, the packets need "
                          f"{len(segs)}", path="fragments")
    out, i, open_ = [], 0, False
    for k, page in enumerate(kept):
        m = len(getattr(page, spec.lacing))
        mine = segs[i:i + m]
        i += m
        page = _with_continued(spec, page, open_)
        if bool(spec.continued(page)) != open_:
            raise EncodeError(f"page {k} says continued={bool(spec.continued(page))}, the "
                              f"packets say {open_}", path=f"fragments[{k}]")
        if mine:
            open_ = mine[-1][0] == CONTINUES
        out.append(dataclasses.replace(page, **{
            spec.lacing: [v for v, _ in mine], spec.piece: b"".join(b for _, b in mine)}))
    return out


def _with_continued(spec: Spec, page: Any, value: bool) -> Any:
    """``page`` with its stored continued flag (a bool or an integer reached by
    ``continued_at``) set to ``value``; unchanged when the flag is computed."""
    where = spec.continued_at
    if not where:
        return page
    chain = [page]
    for name in where:
        chain.append(getattr(chain[-1], name, None))
    cur = chain[-1]
    if isinstance(cur, bool) or type(cur) is int:
        new: Any = type(cur)(value)
    else:
        return page  # an enum or another value: checked, not set
    for owner, name in zip(reversed(chain[:-1]), reversed(where), strict=True):
        if not dataclasses.is_dataclass(owner):
            return page
        new = dataclasses.replace(owner, **{name: new})
    return new


# -- the fast path's calls ---------------------------------------------------------------

def fast_decode(spec: Spec, mv: Any, pos: int, end: int, dec_fragment: Callable,
                dec_record: Callable) -> tuple[FramedList, int]:
    """The fast path: the fragment's and the record's generated checked decoders."""
    return decode(spec, mv, pos, end, lambda p, limit: dec_fragment(mv, p, limit),
                  lambda raw: dec_record(raw, 0, len(raw)))


def fast_encode(spec: Spec, out: bytearray, items: Any, enc_fragment: Callable,
                enc_record: Callable) -> None:
    """The fast path: the fragment's and the record's generated encoders append to ``out``."""
    def record(item: Any) -> bytes:
        buf = bytearray()
        enc_record(buf, item)
        return bytes(buf)

    def pad(n: int) -> None:
        out.extend(bytes(n))

    encode(spec, items, len(out), record, lambda frag: enc_fragment(out, frag),
           lambda: len(out), pad)


# -- the Construct path ------------------------------------------------------------------

_SEG = re.compile(r"\[\d+\]|[^.\[]+")


def _as_decode_error(exc: Exception, base: int, default: int) -> DecodeError:
    """What a Construct parse of a sub-stream raised, as a DecodeError whose offset is
    ``base`` + the sub-stream offset (``default`` when it has none) and whose path is
    relative to the sub-record."""
    err = construct_error(exc, "_")
    path = err.path[1:].lstrip(".") if err.path.startswith("_") else err.path
    return type(err)(err.message, offset=default if err.offset is None else err.offset + base,
                     path=path, expected=err.expected, found=err.found)


class _Window(_io.BytesIO):
    """Bytes ``data`` that sit at offset ``base`` of the outer stream: positions are the
    outer stream's, so a fragment's markers, checksum spans and errors are physical."""

    absolute_positions = True  # read by the inspector: no base to add

    def __init__(self, data: bytes, base: int) -> None:
        super().__init__(data)
        self.base = base

    def tell(self) -> int:
        return super().tell() + self.base

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            offset -= self.base
        return super().seek(offset, whence) + self.base


class Framed(cs.Construct):
    """The Construct twin of a framed field: ``fragment`` and ``record`` are the
    fragment's and the logical record's Construct definitions."""

    def __init__(self, fragment: cs.Construct, record: cs.Construct, spec: Spec,
                 name: str = "") -> None:
        super().__init__()
        self.fragment = fragment
        self.record = record
        self.spec = spec
        self.fieldname = name  # compiled builds note no members: errors name the field

    def _run_parse(self, stream, context, frag_parse: Callable, rec_parse: Callable) -> Any:
        spec = self.spec
        here = stream.tell()
        data = stream.read()  # the field runs to the end of its region

        def read_fragment(p: int, limit: int) -> tuple[Any, int]:
            sub = _Window(data[p - here:limit - here], p)
            try:
                value = frag_parse(sub, context)
            except Exception as exc:  # noqa: BLE001 -- mapped to the project's errors
                raise _as_decode_error(exc, 0, p) from None
            return spec.frag_from_construct(value), sub.tell()

        def read_record(raw: bytes) -> tuple[Any, int]:
            sub = _io.BytesIO(raw)
            try:
                value = rec_parse(sub, context)
            except Exception as exc:  # noqa: BLE001 -- mapped to the project's errors
                raise _as_decode_error(exc, 0, 0) from None
            return spec.item_from_construct(value), sub.tell()

        try:
            value, pos = decode(spec, data, here, here + len(data), read_fragment, read_record,
                                here)
        except DecodeError as exc:
            # the enclosing members add the field's name; offsets stay the stream's
            exc.__dict__["_bw_segs"] = _SEG.findall(exc.path)
            exc.__dict__["_bw_off"] = exc.offset
            raise
        stream.seek(pos)
        return value

    def _run_build(self, obj, stream, context, frag_build: Callable, rec_build: Callable,
                   compiled: bool = False):
        try:
            return self._framed_build(obj, stream, context, frag_build, rec_build, compiled)
        except EncodeError as exc:
            if compiled:  # no member notes the field: the error names it
                inner = exc.path if not exc.path or exc.path.startswith("[") else "." + exc.path
                raise EncodeError(exc.message, path=self.fieldname + inner) from None
            exc.__dict__["_bw_segs"] = _SEG.findall(exc.path)
            raise

    def _framed_build(self, obj, stream, context, frag_build: Callable, rec_build: Callable,
                      compiled: bool):
        spec = self.spec
        start = stream.tell()

        def record(item: Any) -> bytes:
            sub = _io.BytesIO()
            try:
                rec_build(item, sub, context)
            except Exception:
                if compiled:  # the interpreted build names the member that failed
                    self.record._build(item, _io.BytesIO(), context, "(building)")
                raise
            return sub.getvalue()

        def fragment(frag: Any) -> None:
            frag_build(spec.frag_to_construct(frag), stream, context)

        encode(spec, obj, start, record, fragment, stream.tell,
               lambda n: stream.write(bytes(n)))
        return obj

    def _parse(self, stream, context, path):
        return self._run_parse(
            stream, context, lambda io, ctx: self.fragment._parsereport(io, ctx, path),
            lambda io, ctx: self.record._parsereport(io, ctx, path))

    def _build(self, obj, stream, context, path):
        return self._run_build(
            obj, stream, context, lambda o, io, ctx: self.fragment._build(o, io, ctx, path),
            lambda o, io, ctx: self.record._build(o, io, ctx, path))

    def _sizeof(self, context, path):
        raise cs.SizeofError("a framed field has no fixed size", path=path)

    def _emitparse(self, code):
        # the compiled fragment and record parsers run inside the shared walk
        fid = code.allocateId()
        me = f"linkedinstances[{id(self)}]"
        self._compileinstance(code)
        code.append(f"""
            def parse_framed_frag_{fid}(io, this):
                return {self.fragment._compileparse(code)}
            def parse_framed_rec_{fid}(io, this):
                return {self.record._compileparse(code)}
        """)
        return f"{me}._run_parse(io, this, parse_framed_frag_{fid}, parse_framed_rec_{fid})"

    def _emitbuild(self, code):
        fid = code.allocateId()
        me = f"linkedinstances[{id(self)}]"
        self._compileinstance(code)
        code.append(f"""
            def build_framed_frag_{fid}(obj, io, this):
                return {self.fragment._compilebuild(code)}
            def build_framed_rec_{fid}(obj, io, this):
                return {self.record._compilebuild(code)}
        """)
        return (f"{me}._run_build(obj, io, this, build_framed_frag_{fid}, "
                f"build_framed_rec_{fid}, True)")
