"""Custom Construct classes of the Construct path: parameters and code expressions,
compressed and converted sections, chained and to-the-end repeats, padding, numpy arrays,
varints, terminated bytes and closed enums; and the hooks their compiled source uses.
"""


from __future__ import annotations

import re
import struct
import sys
from typing import Any

import construct as cs

from . import varint
from .errors import (
    ChecksumError,
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
)
from .fastpath import (
    DEFAULT_LIMIT,
    LogList,
    compress,
    convert_error,
    decompress,
    decompress_prefix,
    log_loop,
    rows_to_array,
    stop_reason,
    text_error,
)
from .truth import note, note_index, noted_path, pin


# Decompressed sections without a declared size (WAL blocks) are capped here.
class Code(cs.ExprMixin):
    """A context expression that both evaluates (interpreted path) and compiles.

    Construct's compiler inlines ``repr()`` of an expression; a lambda's repr is not code,
    so generated definitions wrap each expression's Python source in ``Code``.
    """

    def __init__(self, source: str, func) -> None:
        self.source = source
        self.func = func

    def __call__(self, obj, *args):
        return self.func(obj)

    def __repr__(self) -> str:
        return self.source

    def __str__(self) -> str:
        return self.source


class WithParams(cs.Subconstruct):
    """Parse/build ``subcon`` with some ``_params`` replaced by expressions of the caller."""

    def __init__(self, subcon: cs.Construct, args: dict[str, Any]) -> None:
        super().__init__(subcon)
        self.args = args

    def _ctx(self, context: cs.Container) -> cs.Container:
        params = cs.Container(context._params)
        for key, fn in self.args.items():
            params[key] = fn(context)
        ctx = cs.Container(context)
        ctx._params = params
        return ctx

    def _parse(self, stream, context, path):
        return self.subcon._parsereport(stream, self._ctx(context), path)

    def _build(self, obj, stream, context, path):
        return self.subcon._build(obj, stream, self._ctx(context), path)

    def _sizeof(self, context, path):
        return self.subcon._sizeof(self._ctx(context), path)

    def _emitparse(self, code):
        fname = f"parse_withparams_{code.allocateId()}"
        sets = "".join(f"\n                _p[{k!r}] = {v!r}" for k, v in self.args.items())
        # a compiled record reads only ``_params`` of its caller's context (it makes its
        # own): hand it that instead of a copy of the whole context
        light = getattr(self.subcon, "_bw_light_params", False)
        ctx = "{'_params': _p}" if light else "Container(this, _params=_p)"
        sub = self.subcon._compileparse(code)
        params = _params_for(self.subcon, self.args) if light else "dict(this['_params'])"
        code.append(f"""
            def {fname}(io, this):
                _p = {params}{sets}
                this = {ctx}
                return {sub}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_withparams_{code.allocateId()}"
        sets = "".join(f"\n                _p[{k!r}] = {v!r}" for k, v in self.args.items())
        code.append(f"""
            def {fname}(obj, io, this):
                _p = Container(this['_params']){sets}
                this = Container(this)
                this['_params'] = _p
                return {self.subcon._compilebuild(code)}
        """)
        return f"{fname}(obj, io, this)"



def _built_aside(code, subcon: cs.Construct, var: str, indent: int = 16) -> str:
    """Compiled-build statements (for an ``_emitbuild`` template indented ``indent``)
    building ``obj`` with ``subcon`` into a BytesIO of its own: its result in ``value``,
    its bytes in ``var``, ``io`` the outer stream again -- for wrappers that write a
    length or a compressed frame ahead of the bytes."""
    lines = ["outer = io", "io = BytesIO()", f"value = {subcon._compilebuild(code)}",
             f"{var} = io.getvalue()", "io = outer"]
    return ("\n" + " " * indent).join(lines)


def _save_plain(context: cs.Container, name: str, plain: bytes) -> None:
    context[f"_plain_{name}"] = plain


class Compressed(cs.Subconstruct):
    """A compressed frame whose plain bytes are ``subcon``: behind a ``length`` prefix, or
    (``length=None``) a self-terminating stream whose end is found by decompressing it."""

    def __init__(self, subcon, algorithm, length, *, expected_size=None, limit=None,
                 name: str = "", codecs: dict | None = None, stored=None) -> None:
        super().__init__(subcon)
        self.algorithm = algorithm
        self.length = length
        self.stored = stored  # the compressed byte count, held by an earlier field
        self.expected_size = expected_size
        self.limit = limit
        self.fieldname = name
        self.codecs = codecs

    def _parse(self, stream, context, path):
        expected = self.expected_size(context) if self.expected_size else None
        cap = self.limit(context) if self.limit else (expected or DEFAULT_LIMIT)
        at = cs.stream_tell(stream, path)
        if self.stored is not None:
            n = self.stored(context)
            if n < 0 or n > _stream_end(stream) - at:
                raise TruncatedError("compressed frame truncated", offset=at,
                                     expected=n, found=_stream_end(stream) - at)
            frame = cs.stream_read(stream, n, path)
            plain = decompress(self.algorithm(context), frame, cap, expected_size=expected,
                               offset=at, path=self.fieldname, codecs=self.codecs)
        elif self.length is None:
            rest = stream.read()
            plain, used = decompress_prefix(self.algorithm(context), rest, cap,
                                            expected_size=expected, offset=at,
                                            path=self.fieldname, codecs=self.codecs)
            cs.stream_seek(stream, at + used, 0, path)
        else:
            try:
                n = self.length._parsereport(stream, context, path)
            except Exception as exc:  # the fast path's name for the frame's length
                exc.__dict__.setdefault("_bw_segs", []).insert(0, "compressed_len")
                raise
            at = stream.tell()  # errors are reported where the frame's bytes start
            if n < 0:  # a signed length prefix (an integer kind such as zigzag)
                raise ConstraintError("negative compressed length", offset=at,
                                      expected=">= 0", found=n)
            if n > _stream_end(stream) - at:
                raise TruncatedError("compressed frame truncated", offset=at,
                                     expected=n, found=_stream_end(stream) - at)
            frame = cs.stream_read(stream, n, path)
            plain = decompress(self.algorithm(context), frame, cap, expected_size=expected,
                               offset=at, path=self.fieldname, codecs=self.codecs)
        _save_plain(context, self.fieldname, plain)
        sub = cs.io.BytesIO(plain)
        try:
            value = self.subcon._parsereport(sub, context, path)
            if sub.tell() != len(plain):  # as the fast path: the plain bytes are all used
                raise ConstraintError("decompressed section has trailing bytes",
                                      offset=sub.tell(), path=_cpath(path),
                                      expected=len(plain), found=sub.tell())
        except DecodeError as exc:
            # As the fast path: an offset inside the plain bytes is not an offset of the
            # input, so report the compressed field's start and keep the inner one in text.
            if exc.offset is not None:
                exc.message += f" (at +{exc.offset} in the section decompressed from offset {at})"
            exc.offset = at
            pin(exc, at)
            raise
        except Exception as exc:
            pin(exc, at)
            raise
        return value

    def _build(self, obj, stream, context, path):
        sub = cs.io.BytesIO()
        value = self.subcon._build(obj, sub, context, path)
        plain = sub.getvalue()
        _save_plain(context, self.fieldname, plain)
        frame = compress(self.algorithm(context), plain, path=self.fieldname,
                         codecs=self.codecs)
        if self.length is not None:
            self.length._build(len(frame), stream, context, path)
        context[f"_stored_{self.fieldname}"] = len(frame)
        cs.stream_write(stream, frame, len(frame), path)
        return value

    def _sizeof(self, context, path):
        raise cs.SizeofError("compressed sections have no fixed size", path=path)

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_compressed_{fid}"
        _bw(code)
        _read_exact(code)
        expected = repr(self.expected_size) if self.expected_size else "None"
        cap = repr(self.limit) if self.limit else "(expected or _bw.DEFAULT_LIMIT)"
        if self.stored is not None:
            frame = f"""n = {self.stored!r}
                if n < 0 or n > _bw._stream_end(io) - at:
                    raise _bw.TruncatedError("compressed frame truncated", offset=at,
                                             expected=n, found=_bw._stream_end(io) - at)
                plain = _bw.decompress({self.algorithm!r}, read_exact(io, n), cap,
                                       expected_size=expected, offset=at,
                                       path={self.fieldname!r}, codecs={self.codecs!r})"""
        elif self.length is None:
            frame = f"""plain, used = _bw.decompress_prefix({self.algorithm!r}, io.read(), cap,
                                                    expected_size=expected, offset=at,
                                                    path={self.fieldname!r}, codecs={self.codecs!r})
                io.seek(at + used)"""
        else:
            frame = f"""n = {self.length._compileparse(code)}
                plain = _bw.decompress({self.algorithm!r}, read_exact(io, n), cap,
                                       expected_size=expected, offset=at,
                                       path={self.fieldname!r}, codecs={self.codecs!r})"""
        code.append(f"""
            def {fname}_sub(io, this):
                return {self.subcon._compileparse(code)}
            def {fname}(io, this):
                expected = {expected}
                cap = {cap}
                at = io.tell()
                {frame}
                this[{"_plain_" + self.fieldname!r}] = plain
                return _bw.parse_plain_section({fname}_sub, plain, this, at)
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_compressed_{code.allocateId()}"
        _bw(code)
        length = "" if self.length is None else f"""
                obj = len(frame)
                {self.length._compilebuild(code)}"""
        code.append(f"""
            def {fname}(obj, io, this):
                {_built_aside(code, self.subcon, "plain")}
                this[{"_plain_" + self.fieldname!r}] = plain
                frame = _bw.compress({self.algorithm!r}, plain, path={self.fieldname!r},
                                     codecs={self.codecs!r}){length}
                this[{"_stored_" + self.fieldname!r}] = len(frame)
                io.write(frame)
                return value
        """)
        return f"{fname}(obj, io, this)"



def parse_plain_section(func, plain: bytes, this: cs.Container, at: int) -> Any:
    """The compiled twin of the tail of :meth:`Compressed._parse`: ``func`` parses the
    decompressed bytes, which it must use up; errors are reported at the section start."""
    sub = cs.io.BytesIO(plain)
    try:
        value = func(sub, this)
        if sub.tell() != len(plain):
            raise ConstraintError("decompressed section has trailing bytes",
                                  offset=sub.tell(), path="", expected=len(plain),
                                  found=sub.tell())
    except DecodeError as exc:
        if exc.offset is not None:
            exc.message += f" (at +{exc.offset} in the section decompressed from offset {at})"
        exc.offset = at
        raise
    return value


class Converted(cs.Adapter):
    """A numeric conversion (``convert:``) on the Construct path: the object model holds
    ``spec.decode(raw)``; building stores ``spec.encode(value)``."""

    def __init__(self, subcon, spec, *, name: str = "") -> None:
        super().__init__(subcon)
        self.spec = spec
        self.fieldname = name

    def _decode(self, obj, context, path):
        try:
            return self.spec.decode(obj)
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is a decode error
            raise convert_error(exc, self.spec.name, None, self.fieldname) from None

    def _encode(self, obj, context, path):
        try:
            return self.spec.encode(obj)
        except EncodeError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is an encode error
            raise EncodeError(f"{self.spec.name} conversion failed: {exc}",
                              path=self.fieldname) from None

    def _emitparse(self, code):
        _bw(code)
        return (f"_bw.convert_decode({_link(code, self)}.spec, {self.subcon._compileparse(code)}, "
                f"None, {self.fieldname!r})")

    def _emitbuild(self, code):
        fname = f"build_converted_{code.allocateId()}"
        _bw(code)
        code.append(f"""
            def {fname}(obj, io, this):
                given = obj
                obj = _bw.convert_encode({_link(code, self)}.spec, obj, {self.fieldname!r})
                {self.subcon._compilebuild(code)}
                return given
        """)
        return f"{fname}(obj, io, this)"



class ChainedRepeat(cs.Subconstruct):
    """Items of ``subcon`` (``count`` of them, or to the end of the region), each parsed
    or built with ``this._chain`` = ``first`` for the first item and then the previous
    item's stored value: the integer (``fmt``) ``at`` bytes after its start, or before
    its end when ``from_end`` -- the Construct twin of a ``chain:`` repeat."""

    def __init__(self, subcon, count, first, fmt: str, at: int, from_end: bool,
                 stop_on_error: bool = False) -> None:
        super().__init__(subcon)
        self.count = count
        self.first = first
        self.fmt = struct.Struct(fmt)
        self.at = at
        self.from_end = from_end
        self.stop_on_error = stop_on_error  # as RepeatToEnd: the log ends at a bad item

    def _stored(self, stream, start: int, stop: int, path):
        cs.stream_seek(stream, stop - self.at if self.from_end else start + self.at, 0, path)
        value = self.fmt.unpack(cs.stream_read(stream, self.fmt.size, path))[0]
        cs.stream_seek(stream, stop, 0, path)
        return value

    def _parse(self, stream, context, path):
        n = self.count(context) if self.count is not None else None
        here = cs.stream_tell(stream, path)
        end = stream.seek(0, 2)
        stream.seek(here)
        items = LogList() if self.stop_on_error else cs.ListContainer()
        context._chain = self.first(context)
        while (len(items) < n) if n is not None else (cs.stream_tell(stream, path) < end):
            start = cs.stream_tell(stream, path)
            try:
                item = _item(self.subcon, stream, context, path, len(items))
                stop = cs.stream_tell(stream, path)
                if stop <= start:
                    raise ConstraintError("repeated item consumes no bytes", offset=start,
                                          path=_cpath(path))
            except Exception as exc:  # noqa: BLE001 -- with stop_on_error the log ends here
                if not self.stop_on_error:
                    raise
                items.stop = stop_reason(construct_error(exc, ""), start)
                stream.seek(end)
                return items
            items.append(item)
            context._chain = self._next(item, stream, context, start, stop, path)
        return items

    def _build(self, obj, stream, context, path):
        n = self.count(context) if self.count is not None else None
        if n is not None and len(obj) != n:
            raise cs.RangeError(f"expected {n} items, found {len(obj)}", path=path)
        context._chain = self.first(context)
        for item in obj:
            start = cs.stream_tell(stream, path)
            built = self.subcon._build(item, stream, context, path)
            context._chain = self._next(built if built is not None else item, stream, context,
                                        start, cs.stream_tell(stream, path), path)
        return obj

    def _next(self, item, stream, context, start: int, stop: int, path):
        """The value the next item's chain param gets (here: the stored integer)."""
        return self._stored(stream, start, stop, path)

    def _sizeof(self, context, path):
        raise cs.SizeofError("chained repeats have no fixed size", path=path)

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_chainedrepeat_{fid}"
        _bw(code)
        _read_exact(code)
        code.append(f"chained_{fid} = struct.Struct({self.fmt.format!r})")
        count = repr(self.count) if self.count is not None else "None"
        where = f"stop - {self.at}" if self.from_end else f"start + {self.at}"
        head, fail = log_loop(self.stop_on_error, 'start')
        code.append(f"""
            def {fname}(io, this):
                n = {count}
                here = io.tell()
                end = io.seek(0, 2)
                io.seek(here)
                {head}
                this['_chain'] = {self.first!r}
                while (len(items) < n) if n is not None else (io.tell() < end):
                    start = io.tell()
                    try:
                        item = {self.subcon._compileparse(code)}
                        stop = io.tell()
                        if stop <= start:
                            raise _bw.ConstraintError("repeated item consumes no bytes",
                                                      offset=start, path="")
                    {fail}
                    items.append(item)
                    io.seek({where})
                    this['_chain'] = chained_{fid}.unpack(read_exact(io, {self.fmt.size}))[0]
                    io.seek(stop)
                return items
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fid = code.allocateId()
        fname = f"build_chainedrepeat_{fid}"
        _bw(code)
        code.append(f"chainedb_{fid} = struct.Struct({self.fmt.format!r})")
        count = repr(self.count) if self.count is not None else "None"
        where = f"stop - {self.at}" if self.from_end else f"start + {self.at}"
        code.append(f"""
            def {fname}(obj, io, this):
                n = {count}
                if n is not None and len(obj) != n:
                    raise RangeError("expected %d items, found %d" % (n, len(obj)))
                this['_chain'] = {self.first!r}
                items = obj
                for obj in items:
                    start = io.tell()
                    {self.subcon._compilebuild(code)}
                    stop = io.tell()
                    io.seek({where})
                    this['_chain'] = chainedb_{fid}.unpack(io.read({self.fmt.size}))[0]
                    io.seek(stop)
                return items
        """)
        return f"{fname}(obj, io, this)"



class Plain(cs.Subconstruct):
    """The uncompressed twin of :class:`Compressed`: records its bytes for checksums."""

    def __init__(self, subcon, *, name: str = "") -> None:
        super().__init__(subcon)
        self.fieldname = name

    def _parse(self, stream, context, path):
        start = cs.stream_tell(stream, path)
        value = self.subcon._parsereport(stream, context, path)
        end = cs.stream_tell(stream, path)
        cs.stream_seek(stream, start, 0, path)
        _save_plain(context, self.fieldname, cs.stream_read(stream, end - start, path))
        return value

    def _build(self, obj, stream, context, path):
        start = cs.stream_tell(stream, path)
        value = self.subcon._build(obj, stream, context, path)
        end = cs.stream_tell(stream, path)
        cs.stream_seek(stream, start, 0, path)
        _save_plain(context, self.fieldname, cs.stream_read(stream, end - start, path))
        return value

    def _emitparse(self, code):
        fname = f"parse_plain_{code.allocateId()}"
        _read_exact(code)
        code.append(f"""
            def {fname}(io, this):
                start = io.tell()
                value = {self.subcon._compileparse(code)}
                end = io.tell()
                io.seek(start)
                this[{"_plain_" + self.fieldname!r}] = read_exact(io, end - start)
                return value
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_plain_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                start = io.tell()
                value = {self.subcon._compilebuild(code)}
                end = io.tell()
                io.seek(start)
                this[{"_plain_" + self.fieldname!r}] = io.read(end - start)
                return value
        """)
        return f"{fname}(obj, io, this)"



def span(this: cs.Container, pieces: list[tuple[str, str]]) -> bytes:
    """The bytes a checksum covers, from Tell markers (or saved plain sections)."""
    io = this["_io"]  # by item: compiled records hand plain dicts as contexts
    here = io.tell()
    out = []
    for kind, name in pieces:
        if kind == "plain":
            out.append(this.get(f"_plain_{name}", b""))
            continue
        if kind == "range":  # record-relative [a, b) from the record's start marker
            a, b = (this["_o_start"] + int(x) for x in name.split(":"))
            io.seek(a)
            out.append(io.read(b - a))
            continue
        a, b = this.get(f"_s_{name}"), this.get(f"_e_{name}")
        if a is None or b is None or b <= a:
            continue
        io.seek(a)
        out.append(io.read(b - a))
    io.seek(here)
    return b"".join(out)


def span_range(this: cs.Container, first: str, last: str) -> bytes:
    """:func:`span` of consecutive fields: the bytes from marker ``first`` to ``last``
    (one read instead of one per field; absent fields between them hold no bytes)."""
    io = this["_io"]
    here = io.tell()
    a = this[first]
    io.seek(a)
    data = io.read(this[last] - a)
    io.seek(here)
    return data


def construct_error(exc: Exception, record: str) -> DecodeError:
    """Map whatever the Construct path raised onto the project's error type, at the
    field and offset the members it left through noted (``truth.note``)."""
    noted = noted_path(exc, record) if record else None
    off = exc.__dict__.get("_bw_off")
    if isinstance(exc, DecodeError):
        if noted is None:
            return exc.prefixed(record)
        exc.path, exc.offset = noted, off
        return exc
    path = getattr(exc, "path", None) or ""
    path = path.replace("(parsing) -> ", "").replace(" -> ", ".") if path else ""
    full = noted or (f"{record}.{path}" if path else record)
    text = str(exc).split("\n")[0]
    if isinstance(exc, (cs.StreamError, cs.core.StreamError)):
        return TruncatedError(f"truncated: {text}", path=full, offset=off)
    if isinstance(exc, cs.ChecksumError):
        return ChecksumError(f"checksum mismatch: {text}", path=full, offset=off)
    return ConstraintError(f"{type(exc).__name__}: {text}", path=full, offset=off)


class Terminated(cs.Subconstruct):
    """Items of ``subcon`` up to one equal to ``terminator`` (consumed, not returned).

    The Construct twin of ``repeat: {until: N}``; on build the terminator is appended
    and an item equal to it is refused (it would end the list early).
    """

    def __init__(self, subcon, terminator) -> None:
        super().__init__(subcon)
        self.terminator = terminator

    def _parse(self, stream, context, path):
        items = cs.ListContainer()
        while True:
            item = _item(self.subcon, stream, context, path, len(items))
            if item == self.terminator:
                return items
            items.append(item)

    def _build(self, obj, stream, context, path):
        for item in obj:
            if item == self.terminator:
                raise cs.ValidationError(f"an item equals the terminator {self.terminator!r}",
                                         path=path)
            self.subcon._build(item, stream, context, path)
        self.subcon._build(self.terminator, stream, context, path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("terminated lists have no fixed size", path=path)

    def _emitparse(self, code):
        fname = f"parse_terminated_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                items = ListContainer()
                while True:
                    item = {self.subcon._compileparse(code)}
                    if item == {self.terminator!r}:
                        return items
                    items.append(item)
        """)
        return f"{fname}(io, this)"


# -- strict Construct twins (both paths must agree: no silent stop, no skipped rule) ----

    def _emitbuild(self, code):
        fname = f"build_terminated_{code.allocateId()}"
        sub = self.subcon._compilebuild(code)
        code.append(f"""
            def {fname}(obj, io, this):
                items = obj
                for obj in items:
                    if obj == {self.terminator!r}:
                        raise ValidationError("an item equals the terminator %r"
                                              % ({self.terminator!r},))
                    {sub}
                obj = {self.terminator!r}
                {sub}
                return items
        """)
        return f"{fname}(obj, io, this)"


def _item(subcon, stream, context, path, index: int) -> Any:
    """Item ``index`` of a list: a failure names it (``items[2].x``) and where it starts."""
    start = stream.tell()
    try:
        return subcon._parsereport(stream, context, path)
    except Exception as exc:
        note_index(exc, index, start)
        raise


def _cpath(path: str | None) -> str:
    """A Construct path ("(parsing) -> a -> b") as a field path ("a.b")."""
    return (path or "").replace("(parsing) -> ", "").replace("(building) -> ", "") \
        .replace(" -> ", ".")


def _stream_end(stream) -> int:
    here = stream.tell()
    end = stream.seek(0, 2)
    stream.seek(here)
    return end


class RepeatToEnd(cs.Subconstruct):
    """Items of ``subcon`` until the enclosing region ends (``repeat: eos``).

    Unlike ``GreedyRange`` a partial or corrupt last item is an error, as on the fast
    path, instead of a silent stop; an item that consumes no bytes is refused.
    """

    def __init__(self, subcon, stop_on_error: bool = False) -> None:
        super().__init__(subcon)
        self.stop_on_error = stop_on_error

    def _parse(self, stream, context, path):
        end = _stream_end(stream)
        items = LogList() if self.stop_on_error else cs.ListContainer()
        pos = cs.stream_tell(stream, path)
        while pos < end:
            try:
                try:
                    item = self.subcon._parsereport(stream, context, path)
                except Exception as exc:
                    note_index(exc, len(items), pos)
                    raise
                nxt = cs.stream_tell(stream, path)
                if nxt <= pos:
                    raise ConstraintError("repeated item consumes no bytes", offset=pos,
                                          path=_cpath(path))
            except Exception as exc:  # noqa: BLE001 -- every failure ends the log here
                if not self.stop_on_error:
                    raise
                items.stop = stop_reason(construct_error(exc, ""), pos)
                stream.seek(end)
                return items
            items.append(item)
            pos = nxt
        return items

    def _build(self, obj, stream, context, path):
        for i, item in enumerate(obj):
            try:
                self.subcon._build(item, stream, context, path)
            except Exception as exc:
                note_index(exc, i, 0)
                raise
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("repeat to end has no fixed size", path=path)

    def _emitparse(self, code):
        # compiled, the item loop runs the compiled item parser (an interpreted loop here
        # would run every item interpreted, which defeats compile()); the log variant maps
        # a failure to its stop reason as _parse does (reads are checked when compiled, so
        # a short item is "truncated" on both)
        fname = f"parse_repeattoend_{code.allocateId()}"
        _bw(code)
        head, fail = log_loop(self.stop_on_error, 'pos')
        code.append(f"""
            def {fname}(io, this):
                pos = io.tell()
                end = io.seek(0, 2)
                io.seek(pos)
                {head}
                while pos < end:
                    try:
                        item = {self.subcon._compileparse(code)}
                        nxt = io.tell()
                        if nxt <= pos:
                            raise _bw.ConstraintError("repeated item consumes no bytes",
                                                      offset=pos, path="")
                    {fail}
                    items.append(item)
                    pos = nxt
                return items
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_repeattoend_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                items = obj
                for obj in items:
                    {self.subcon._compilebuild(code)}
                return items
        """)
        return f"{fname}(obj, io, this)"



class RepeatUntil(cs.Subconstruct):
    """Items of ``subcon`` up to and including the first for which ``predicate`` holds
    (``repeat: {until_expr: ...}``); the region ending first is a truncation error."""

    def __init__(self, subcon, predicate) -> None:
        super().__init__(subcon)
        self.predicate = predicate

    def _parse(self, stream, context, path):
        items = cs.ListContainer()
        while True:
            item = _item(self.subcon, stream, context, path, len(items))
            items.append(item)
            context._last = item
            if self.predicate(context):
                return items

    def _build(self, obj, stream, context, path):
        for i, item in enumerate(obj):
            built = self.subcon._build(item, stream, context, path)
            context._last = built if built is not None else item
            if self.predicate(context) != (i == len(obj) - 1):
                raise cs.ValidationError("repeat-until condition must hold on the last item "
                                         "and only there", path=path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("repeat-until lists have no fixed size", path=path)

    def _emitparse(self, code):
        fname = f"parse_repeatuntil_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                items = ListContainer()
                while True:
                    item = {self.subcon._compileparse(code)}
                    items.append(item)
                    this['_last'] = item
                    if {self.predicate!r}:
                        return items
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_repeatuntil_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                items = obj
                last = len(items) - 1
                for i, obj in enumerate(items):
                    built = {self.subcon._compilebuild(code)}
                    this['_last'] = built if built is not None else obj
                    if ({self.predicate!r}) != (i == last):
                        raise ValidationError("repeat-until condition must hold on the last "
                                              "item and only there")
                return items
        """)
        return f"{fname}(obj, io, this)"



class ZeroPadding(cs.Construct):
    """Padding of a computed length whose bytes must be zero (unless ``arbitrary``)."""

    def __init__(self, length, arbitrary: bool = False) -> None:
        super().__init__()
        self.length = length
        self.arbitrary = arbitrary
        self.flagbuildnone = True  # built from nothing, like Construct's Padding

    def _parse(self, stream, context, path):
        n = self.length(context)
        at = cs.stream_tell(stream, path)
        data = cs.stream_read(stream, n, path)
        if not self.arbitrary and any(data):
            raise ConstraintError("padding must be zero", offset=at, path=_cpath(path))
        return None

    def _build(self, obj, stream, context, path):
        n = self.length(context)
        cs.stream_write(stream, bytes(n), n, path)
        return None

    def _sizeof(self, context, path):
        return self.length(context)

    def _emitparse(self, code):
        fname = f"parse_zeropadding_{code.allocateId()}"
        _bw(code)
        _read_exact(code)
        check = "" if self.arbitrary else """
                if data.count(0) != len(data):
                    raise _bw.ConstraintError("padding must be zero", offset=at, path="")"""
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                data = read_exact(io, {self.length!r}){check}
                return None
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        return f"(io.write(bytes({self.length!r})), None)[1]"



class NumpyArray(cs.Construct):
    """``count`` fixed-size items as a numpy array (``view: numpy``), bit-exact.

    Going through Python floats would turn signalling NaNs into quiet ones; reading the
    bytes straight into the dtype keeps every payload bit, as the fast path does.
    """

    def __init__(self, count, dtype) -> None:
        import numpy as np  # records with numpy views only: the CLI starts without it

        super().__init__()
        self.count = count
        self.dtype = np.dtype(dtype)

    def _parse(self, stream, context, path):
        n = self.count(context) if callable(self.count) else self.count
        if n < 0:
            raise ConstraintError("negative count", path=_cpath(path), found=n)
        data = cs.stream_read(stream, n * self.dtype.itemsize, path)
        return sys.modules["numpy"].frombuffer(data, self.dtype, n)

    def _build(self, obj, stream, context, path):
        np = sys.modules["numpy"]  # imported by __init__
        arr = np.ascontiguousarray(obj, dtype=self.dtype) if isinstance(obj, np.ndarray) \
            else rows_to_array(obj, self.dtype)
        n = self.count(context) if callable(self.count) else self.count
        if len(arr) != n:  # written, another count would be read back
            raise EncodeError(f"expected {n} items, found {len(arr)}")
        data = arr.tobytes()
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("numpy arrays have a computed size", path=path)

    def _emitparse(self, code):
        fname = f"parse_numpyarray_{code.allocateId()}"
        _bw(code)
        _read_exact(code)
        code.append(f"""
            def {fname}(io, this):
                n = {self.count!r}
                if n < 0:
                    raise _bw.ConstraintError("negative count", path="", found=n)
                dtype = {_link(code, self)}.dtype
                return _bw.np.frombuffer(read_exact(io, n * dtype.itemsize), dtype, n)
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _bw(code)
        dtype = f"{_link(code, self)}.dtype"  # data only (see _link)
        return f"_bw.numpy_build(obj, io, {dtype}, {self.count!r})"



class Leb128(cs.Construct):
    """A varint on the Construct path with the fast path's exact rules (``kind`` is
    uleb128, sleb128 or zigzag): at most 10 bytes, 64-bit range, minimal on build."""

    def __init__(self, kind: str = "uleb128") -> None:
        super().__init__()
        self.kind = kind
        self._decode = varint.DECODERS[kind]
        self._encode = varint.ENCODERS[kind]

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        data = bytearray()
        while True:
            chunk = stream.read(1)
            if not chunk:
                break
            data += chunk
            if not chunk[0] & 0x80 or len(data) > 10:
                break
        try:
            value, n = self._decode(bytes(data), 0, path=_cpath(path))
        except DecodeError as exc:
            exc.offset = at
            raise
        stream.seek(at + n)
        return value

    def _build(self, obj, stream, context, path):
        data = self._encode(obj)
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("varints have no fixed size", path=path)

    def _emitparse(self, code):
        fname = f"parse_{self.kind}_{code.allocateId()}"
        _bw(code)
        # one byte below 0x80 is the whole uleb128 (the common case, inline); anything
        # else goes through the same decoder as _parse, on the same (at most 11) bytes
        quick = """
                if data and data[0] < 0x80:
                    io.seek(at + 1)
                    return data[0]""" if self.kind == "uleb128" else ""
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                data = io.read(11){quick}
                try:
                    value, n = _bw.varint.DECODERS[{self.kind!r}](data, 0, path="")
                except _bw.DecodeError as exc:
                    exc.offset = at
                    raise
                io.seek(at + n)
                return value
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _bw(code)
        return f"(io.write(_bw.varint.ENCODERS[{self.kind!r}](obj)), obj)[1]"



class TerminatedBytes(cs.Construct):
    """Bytes (or text in ``encoding``) up to ``term`` (consumed, not part of the value);
    the fast path's rule exactly: the first occurrence at any offset."""

    def __init__(self, term: bytes, encoding: str | None = None) -> None:
        super().__init__()
        self.term = term
        self.encoding = encoding

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        end = _stream_end(stream)
        data = stream.read(end - at)
        i = data.find(self.term)
        if i < 0:
            raise TruncatedError("terminator not found", offset=at, path=_cpath(path),
                                 expected=self.term)
        stream.seek(at + i + len(self.term))
        raw = data[:i]
        if self.encoding is None:
            return raw
        try:
            return raw.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise text_error(exc, at, self.encoding, _cpath(path)) from None

    def _build(self, obj, stream, context, path):
        raw = obj.encode(self.encoding) if self.encoding else bytes(obj)
        if self.term in raw:
            raise EncodeError(f"value contains the terminator {self.term.hex()}",
                              path=_cpath(path))
        data = raw + self.term
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError("terminated bytes have no fixed size", path=path)

    def _emitparse(self, code):
        fname = f"parse_terminatedbytes_{code.allocateId()}"
        _bw(code)
        decode = "return raw" if self.encoding is None else f"""try:
                    return raw.decode({self.encoding!r})
                except UnicodeDecodeError as exc:
                    raise _bw.text_error(exc, at, {self.encoding!r}, "") from None"""
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                data = io.read()
                i = data.find({self.term!r})
                if i < 0:
                    raise _bw.TruncatedError("terminator not found", offset=at, path="",
                                             expected={self.term!r})
                io.seek(at + i + {len(self.term)})
                raw = data[:i]
                {decode}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _bw(code)
        return f"_bw.terminated_build(obj, io, {self.term!r}, {self.encoding!r})"



def remaining(this: cs.Container) -> int:
    """``_remaining`` on the Construct path: bytes left in the enclosing region."""
    io = this["_io"]  # by item: compiled records hand plain dicts as contexts
    return _stream_end(io) - io.tell()


def no_remaining() -> int:
    raise EncodeError("_remaining is only known while decoding; give the value instead")


# -- "the log ends here": repeats that stop at the first item failing validation --------

def build_bytes(con: cs.Construct, value: Any, this: cs.Container,
                name: str | None = None) -> bytes:
    """``con`` built alone (in the caller's context), to measure it before writing. A
    failure is the measured field's (``name``), not the field being built when it ran."""
    stream = cs.io.BytesIO()
    try:
        con._build(value, stream, this, "(building)")
    except Exception as exc:
        if name:
            note(exc, 0, name)
            exc._bw_measured = True  # type: ignore[attr-defined]
        raise
    return stream.getvalue()


class ClosedEnum(cs.Subconstruct):
    """A closed enum's integer, refused while parsing when unknown or retired (the fast
    path's messages), so a bad value stops the Construct path where it stops the fast one."""

    def __init__(self, subcon, cls_name: str, values, retired=()) -> None:
        super().__init__(subcon)
        self.cls_name = cls_name
        self.values = frozenset(values)
        self.retired = tuple(retired)

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        raw = self.subcon._parsereport(stream, context, path)
        if raw not in self.values:
            raise self.refuse(raw, at, _cpath(path))
        return raw

    def _build(self, obj, stream, context, path):
        if obj not in self.values:  # written, it would not decode
            raise EncodeError(f"{obj!r} is not a {self.cls_name} value", path=_cpath(path))
        return self.subcon._build(obj, stream, context, path)

    def refuse(self, raw: int, at: int, path: str) -> ConstraintError:
        """The error for a value outside the enum (both paths raise it)."""
        what = "retired" if raw in self.retired else "unknown"
        tail = " (permanently retired, never reused)" if what == "retired" else ""
        return ConstraintError(f"{what} {self.cls_name} value{tail}", offset=at, path=path,
                               expected=sorted(self.values), found=raw)

    def _emitparse(self, code):
        fname = f"parse_closedenum_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                at = io.tell()
                raw = {self.subcon._compileparse(code)}
                if raw not in {set(self.values)!r}:
                    raise {_link(code, self)}.refuse(raw, at, "")
                return raw
        """)
        return f"{fname}(io, this)"


# -- compiled parsing that checks every read -------------------------------------------
# Construct's compiler emits a bare ``io.read(n)`` for these classes: a short read then
# yields short bytes instead of an error (a truncated input "decodes"). The subclasses
# below emit a checked read; generated modules import them over Construct's names.

    def _emitbuild(self, code):
        return (f"({self.subcon._compilebuild(code)} if obj in {set(self.values)!r} else "
                f"{_link(code, self)}.refuse_build(obj))")

    def refuse_build(self, obj: Any) -> Any:
        raise EncodeError(f"{obj!r} is not a {self.cls_name} value")


_READ_EXACT = '''
def read_exact(io, n):
    if n < 0:
        raise StreamError("length must be non-negative, found %r" % (n,))
    data = io.read(n)
    if len(data) != n:
        raise StreamError("stream read less than specified amount, expected %d, found %d"
                          % (n, len(data)))
    return data


def restream_exact(data, func):
    io = BytesIO(data)
    obj = func(io)
    if io.tell() != len(data):
        raise StreamError("section size mismatch: %d of %d bytes used" % (io.tell(), len(data)))
    return obj
'''


def _read_exact(code) -> str:
    if not getattr(code, "_bytewright_read_exact", False):
        code.append(_READ_EXACT)
        code._bytewright_read_exact = True
    return "read_exact"


def _bw(code) -> str:
    """Make this module reachable as ``_bw`` in the compiled source (errors, decoders)."""
    code.append("from bytewright.runtime import codec as _bw")
    return "_bw"


def _link(code, obj: Any) -> str:
    """Source naming ``obj`` in the compiled module, for its data (a dtype, a conversion
    spec, an error builder), never for an interpreted ``_parse``."""
    obj._compileinstance(code)  # all three tables: a build may still fall back to it
    return f"linkedinstances[{id(obj)}]"


def _params_for(callee: Any, args: dict) -> str:
    """Source of the parameters a call of ``callee`` with ``args`` replaced gets: a copy
    of the caller's, or (when the callee reads only those) a fresh dict."""
    read = getattr(callee, "_bw_params_read", None)
    return "{}" if read is not None and read <= set(args) else "dict(this['_params'])"


def short_read(n: int, data: bytes) -> cs.StreamError:
    """``read_exact``'s error, for reads the compiled records inline."""
    if n < 0:
        return cs.StreamError(f"length must be non-negative, found {n!r}")
    return cs.StreamError(f"stream read less than specified amount, expected {n}, "
                          f"found {len(data)}")


def _bind(pending: dict, prefix: str, obj: Any) -> str:
    """The name ``obj`` has in the compiled module being emitted (bound after exec)."""
    for name, other in pending.items():
        if other is obj:
            return name
    stem = re.sub(r"\W", "_", getattr(obj, "__name__", ""))
    name = f"{prefix}_{stem}_{len(pending)}"
    pending[name] = obj
    return name


class CompileState:
    """The record whose ``Struct.compile`` is running (``root``) and the objects its
    compiled source names (``pending``), bound after the source is executed. One compile
    at a time (the caller holds a lock); classes of other modules emit into it."""

    root: Any = None
    pending: dict | None = None
