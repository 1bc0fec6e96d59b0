"""Byte order as data on the Construct path: a record whose ``endian:`` is an expression.

``ByteOrder`` holds the record's two concrete definitions (one per order) and picks one
the way the fast path's dispatcher does: on parse it peeks the fields the expression
names at their fixed offsets (their own order is explicit) before reading anything, on
build it reads them from the value; params come from the context. A value other than
'le'/'be' is the same error on both paths.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import construct as cs

from .construct_support import _link, _stream_end
from .errors import ConstraintError, EncodeError, TruncatedError
from .truth import note

ORDERS = ("le", "be")


class ByteOrder(cs.Construct):
    """Parse/build with ``le`` or ``be`` as ``choose(marks, params)`` says.

    ``marks`` are ``(name, offset, struct format, size)`` of the fields the expression
    reads; ``consts`` the values of marks the model does not carry (constants).
    """

    def __init__(self, record: str, le: cs.Construct, be: cs.Construct, marks: tuple,
                 choose: Callable[[dict, dict], Any], consts: dict | None = None) -> None:
        super().__init__()
        self.record, self.le, self.be = record, le, be
        self.marks, self.choose, self.consts = tuple(marks), choose, dict(consts or {})
        first = min(self.marks, key=lambda m: m[1]) if self.marks else None
        self.first = first[0] if first else ""
        self.at = first[1] if first else 0
        self.need = max((off + size for _, off, _, size in self.marks), default=0)
        self.flagbuildnone = le.flagbuildnone and be.flagbuildnone

    def order_at(self, stream, params) -> str:
        """The order of the record starting at the stream's position (left unmoved)."""
        at = stream.tell()
        values: dict[str, Any] = {}
        if self.marks:
            left = _stream_end(stream) - at
            if left < self.need:
                exc = TruncatedError("byte order mark truncated", offset=at, path=self.first,
                                     expected=self.need, found=left)
                note(exc, at, self.first)
                raise exc
            for name, off, fmt, size in self.marks:
                stream.seek(at + off)
                values[name] = struct.unpack(fmt, stream.read(size))[0]
            stream.seek(at)
        order = self.choose(values, params or {})
        if order not in ORDERS:
            exc = ConstraintError(f"byte order of {self.record} must be le or be",
                                  offset=at + self.at, path=self.first,
                                  expected="'le' or 'be'", found=order)
            note(exc, at + self.at, self.first)
            raise exc
        return order

    def order_of(self, obj, params) -> str:
        """The order a value is built in (its marks, or the params)."""
        values = {}
        for name, _, _, _ in self.marks:
            values[name] = self.consts[name] if name in self.consts else obj[name]
        order = self.choose(values, params or {})
        if order not in ORDERS:
            exc = EncodeError(f"byte order of {self.record} must be le or be, not {order!r}",
                              path=self.first)
            if self.first:
                note(exc, 0, self.first)  # named as the mark, however deep the record sits
            raise exc
        return order

    def _parse(self, stream, context, path):
        sub = self.le if self.order_at(stream, context._params) == "le" else self.be
        return sub._parsereport(stream, context, path)

    def _build(self, obj, stream, context, path):
        sub = self.le if self.order_of(obj, context._params) == "le" else self.be
        return sub._build(obj, stream, context, path)

    def _sizeof(self, context, path):
        raise cs.SizeofError("a record whose byte order is data has no fixed size", path=path)

    def _emitparse(self, code):
        fname = f"parse_byteorder_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                if {_link(code, self)}.order_at(io, this['_params']) == 'le':
                    return {self.le._compileparse(code)}
                return {self.be._compileparse(code)}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        fname = f"build_byteorder_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                if {_link(code, self)}.order_of(obj, this['_params']) == 'le':
                    return {self.le._compilebuild(code)}
                return {self.be._compilebuild(code)}
        """)
        return f"{fname}(obj, io, this)"
