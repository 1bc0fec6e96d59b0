"""Construct-path support for lookahead fields (``peek: true``) and for repeats whose
items are chained by a decoded value (``chain:`` naming a field of the item's model).

A lookahead reads a value where the stream stands and leaves the stream there: it owns
no bytes, so it builds nothing. A chained repeat of decoded values hands each item the
previous item's value of a model field (``None`` for an absent optional field) as a
param -- MIDI running status is "the previous event's effective status".
"""

from __future__ import annotations

import construct as cs

from .construct_support import ChainedRepeat, _bw, _link
from .errors import ConstraintError, TruncatedError
from .fastpath import log_loop


class Peek(cs.Subconstruct):
    """``subcon`` read without consuming its bytes; never written."""

    flagbuildnone = True

    def __init__(self, subcon, size: int) -> None:
        super().__init__(subcon)
        self.size = size
        self.flagbuildnone = True

    def _parse(self, stream, context, path):
        here = cs.stream_tell(stream, path)
        end = stream.seek(0, 2)
        stream.seek(here)
        if here + self.size > end:  # as a read of the value would: truncated here
            raise cs.StreamError(f"stream read less than specified amount, expected "
                                 f"{self.size}, found {end - here}", path=path)
        value = self.subcon._parsereport(stream, context, path)
        cs.stream_seek(stream, here, 0, path)
        return value

    def _build(self, obj, stream, context, path):
        return None

    def _sizeof(self, context, path):
        return 0

    def _emitparse(self, code):
        fname = f"parse_peek_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                here = io.tell()
                end = io.seek(0, 2)
                io.seek(here)
                if here + {self.size} > end:
                    raise StreamError("stream read less than specified amount, expected "
                                      "{self.size}, found %d" % (end - here))
                value = {self.subcon._compileparse(code)}
                io.seek(here)
                return value
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        return "None"  # owns no bytes


class ChainedValues(ChainedRepeat):
    """A chained repeat whose items get the previous item's decoded value of ``source``
    (a model field, an optional field or a value with no type) instead of stored bytes."""

    def __init__(self, subcon, count, first, source: str, compute=None, min_size: int = 1,
                 stop_on_error: bool = False) -> None:
        super().__init__(subcon, count, first, ">B", 0, False, stop_on_error)
        self.source = source
        self.min_size = min_size  # the least bytes an item takes (the fast path's bound)
        # a value with no type is no member of the item's Container: ``compute(item,
        # param)`` derives it from the item's members and the param the item was given
        self.compute = compute

    def _parse(self, stream, context, path):
        if self.count is not None:  # a count the bytes left cannot hold: as the fast path
            n = self.count(context)
            at = cs.stream_tell(stream, path)
            left = stream.seek(0, 2) - at
            stream.seek(at)
            if n < 0:
                raise ConstraintError(f"negative count {n}", offset=at, expected=">= 0",
                                      found=n)
            if n * self.min_size > left:
                raise TruncatedError(f"count {n} needs at least {n * self.min_size} bytes",
                                     offset=at, expected=n * self.min_size, found=left)
        return super()._parse(stream, context, path)

    def _next(self, item, stream, context, start: int, stop: int, path):
        return self.value(item, context._chain)

    def value(self, item, given):
        """``source`` of ``item``, which was parsed or built with param ``given``."""
        if not isinstance(item, dict):  # the model a compiled parse built directly
            return getattr(item, self.source)
        if self.source in item:  # a member, or (on build) the model's value
            return item[self.source]
        return self.compute(item, given)

    def _emitparse(self, code):
        fid = code.allocateId()
        fname = f"parse_chainedvalues_{fid}"
        me = _link(code, self)
        code.append("from bytewright.runtime import errors as _bwe")
        _bw(code)
        head, fail = log_loop(self.stop_on_error, 'start')  # a log ends at a bad item
        code.append(f"""
            def {fname}(io, this):
                n = {self.count!r}
                here = io.tell()
                end = io.seek(0, 2)
                io.seek(here)
                if n is not None and n < 0:
                    raise _bwe.ConstraintError("negative count %d" % n, offset=here,
                                               expected=">= 0", found=n)
                if n is not None and n * {self.min_size} > end - here:
                    raise _bwe.TruncatedError("count %d needs at least %d bytes"
                                              % (n, n * {self.min_size}), offset=here,
                                              expected=n * {self.min_size}, found=end - here)
                {head}
                this['_chain'] = {self.first!r}
                while (len(items) < n) if n is not None else (io.tell() < end):
                    start = io.tell()
                    try:
                        item = {self.subcon._compileparse(code)}
                        if io.tell() <= start:
                            raise _bwe.ConstraintError("repeated item consumes no bytes",
                                                       offset=start, path="")
                    {fail}
                    items.append(item)
                    this['_chain'] = {me}.value(item, this['_chain'])
                return items
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fid = code.allocateId()
        fname = f"build_chainedvalues_{fid}"
        me = _link(code, self)
        code.append(f"""
            def {fname}(obj, io, this):
                n = {self.count!r}
                if n is not None and len(obj) != n:
                    raise RangeError("expected %d items, found %d" % (n, len(obj)))
                this['_chain'] = {self.first!r}
                items = obj
                for obj in items:
                    built = {self.subcon._compilebuild(code)}
                    this['_chain'] = {me}.value(built if built is not None else obj,
                                                this['_chain'])
                return items
        """)
        return f"{fname}(obj, io, this)"


def chain_models(items, first, convert, source: str) -> list:
    """Parsed items -> models, each converted with the param its item was given: ``first``,
    then the previous model's ``source``."""
    out, param = [], first
    for item in items:
        model = convert(item, param)
        out.append(model)
        param = getattr(model, source)
    return out
