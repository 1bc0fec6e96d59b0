"""Support for checksums that come before, or sit inside, the bytes they cover.

Both codec paths read such a checksum as a plain value, check it once the last byte it
covers has been read, and on encode write a placeholder (the filler) that is patched in
place once the covered bytes are written. This module holds what the generated code
calls for that: the covered bytes of an absolute range of the user's buffer, the bytes
from the Construct path's ``Tell`` markers with the checksum's own bytes read as its
filler, and :class:`LateChecksum`, the Construct member that checks or patches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import construct as cs

from .errors import ChecksumError, EncodeError, TruncatedError
from .truth import note

Buffer = bytes | bytearray | memoryview


def _filled(data: Buffer, a: int, at: int, filler: bytes) -> Buffer:
    """``data`` (bytes ``a``.. of the buffer) with the checksum's own bytes, at ``at``,
    read as its filler."""
    lo, hi = max(at - a, 0), min(at + len(filler) - a, len(data))
    if lo >= hi:
        return data
    out = bytearray(data)
    out[lo:hi] = filler[lo - (at - a):hi - (at - a)]
    return bytes(out)


def file_range(buf: Buffer, a: Any, b: Any, at: int, path: str, filler: bytes) -> Buffer:
    """``buf[a:b]`` of the buffer being decoded (absolute offsets), the checksum's own
    bytes (at ``at``) read as ``filler``; a range outside the buffer is a
    :class:`TruncatedError` at the checksum field's offset."""
    size = len(buf)
    if not (isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= size):
        raise TruncatedError(f"checksum range [{a}, {b}) lies outside the {size} bytes",
                             offset=at, path=path, expected=f"0 <= start <= end <= {size}",
                             found=(a, b))
    return _filled(buf[a:b], a, at, filler)


def file_range_out(out: bytearray, a: Any, b: Any, path: str) -> bytes:
    """``out[a:b]`` of the bytes encoded so far; a range reaching past them (or not a
    range) is an :class:`EncodeError`: the checksum could not be computed."""
    size = len(out)
    if not (isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= size):
        raise EncodeError(f"checksum range [{a}, {b}) is not within the {size} bytes "
                          "written by the end of the record", path=path)
    return bytes(out[a:b])


def stream_range(this: Any, a: Any, b: Any, name: str, filler: bytes) -> bytes:
    """The Construct path's :func:`file_range` / :func:`file_range_out`: absolute
    ``[a, b)`` of the stream (the buffer parsed, or the bytes being built: a record with
    such a checksum is never read from a section of its own), the checksum's own bytes
    read as ``filler`` (on build they are the filler)."""
    root = this["_io"]
    here = root.tell()
    size = root.seek(0, 2)
    try:
        if not (isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= size):
            if this["_parsing"]:
                at = this[f"_o_{name}"]  # in this stream: a sub-stream's base is added above
                exc = TruncatedError(f"checksum range [{a}, {b}) lies outside the {size} "
                                     "bytes", offset=at, path=name,
                                     expected=f"0 <= start <= end <= {size}", found=(a, b))
                note(exc, at, name)
                raise exc
            raise EncodeError(f"checksum range [{a}, {b}) is not within the {size} bytes "
                              "written by the end of the record", path=name)
        root.seek(a)
        return _filled(root.read(b - a), a, this[f"_o_{name}"], filler)
    finally:
        root.seek(here)


def span(this: Any, pieces: list[tuple[str, str]], filler: bytes = b"") -> bytes:
    """The bytes a checksum covers, from ``Tell`` markers: ``("span", field)`` the
    field's bytes, ``("plain", field)`` a compressed field's plain bytes, ``("fill",
    field)`` the checksum's own bytes read as ``filler`` (when the field is present)."""
    io = this["_io"]
    here = io.tell()
    out = []
    for kind, name in pieces:
        if kind == "plain":
            out.append(this.get(f"_plain_{name}", b""))
            continue
        a, b = this.get(f"_s_{name}"), this.get(f"_e_{name}")
        if a is None or b is None or b <= a:
            continue
        if kind == "fill":
            out.append(filler)
            continue
        io.seek(a)
        out.append(io.read(b - a))
    io.seek(here)
    return b"".join(out)


def mismatch(algorithm: str, name: str, at: int, expected: Any, found: Any) -> ChecksumError:
    """The error of a late checksum that does not match, noted at its own field."""
    exc = ChecksumError(f"{algorithm} mismatch", offset=at, path=name, expected=expected,
                        found=found)
    note(exc, at, name)
    return exc


class LateChecksum(cs.Construct):
    """A Construct member placed after the last field a checksum covers: on parse it
    checks the value read at the checksum's own place (``check``), on build it
    computes the value and writes it over the placeholder there (``patch``).

    ``value`` computes the checksum from the context (a :class:`~codec.Code`); the
    checksum's field starts at the ``_o_<name>`` marker and is built with ``field``.
    """

    def __init__(self, name: str, field: cs.Construct, value: Callable[[Any], Any],
                 algorithm: str, *, check: bool, patch: bool) -> None:
        super().__init__()
        self.field_name, self.field, self.value = name, field, value
        self.algorithm, self.check, self.patch = algorithm, check, patch
        self.flagbuildnone = True

    def _parse(self, stream, context, path):
        found = context.get(self.field_name) if self.check else None
        if found is None:  # absent (a condition), or not the place it is checked
            return None
        want = self.value(context)
        if found != want:
            raise mismatch(self.algorithm, self.field_name, context[f"_o_{self.field_name}"],
                           want, found)
        return None

    def _build(self, obj, stream, context, path):
        if not self.patch or context.get(self.field_name) is None:
            return None
        want = self.value(context)
        here = stream.tell()
        stream.seek(context[f"_o_{self.field_name}"])
        self.field._build(want, stream, context, path)
        stream.seek(here)
        context[self.field_name] = want
        return None

    def _sizeof(self, context, path):
        return 0

    def _emitparse(self, code):
        from .construct_support import _link  # the compiled module reaches this object by id

        if not self.check:
            return "None"
        me = _link(code, self)
        fname = f"parse_late_checksum_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                found = this.get({self.field_name!r})
                if found is not None:
                    want = {self.value!r}
                    if found != want:
                        raise {me}.fail(this, want, found)
                return None
        """)
        return f"{fname}(io, this)"

    def fail(self, this: Any, want: Any, found: Any) -> ChecksumError:
        return mismatch(self.algorithm, self.field_name, this[f"_o_{self.field_name}"],
                        want, found)

    def _emitbuild(self, code):
        if not self.patch:
            return "None"
        fname = f"build_late_checksum_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                if this.get({self.field_name!r}) is not None:
                    obj = {self.value!r}
                    here = io.tell()
                    io.seek(this[{'_o_' + self.field_name!r}])
                    {self.field._compilebuild(code)}
                    io.seek(here)
                    this[{self.field_name!r}] = obj
                return None
        """)
        return f"{fname}(io, this)"
