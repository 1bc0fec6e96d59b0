"""Integer kinds: every way a format writes an integer other than a fixed-width binary one.

Stability: public API (``bytewright.runtime.numbers``). A kind is registered in the
registry (:meth:`~bytewright.runtime.registry.Registry.add_integer_kind`) exactly as a
user's plug-in registers one; the built-ins below are loaded through
:func:`register`. A schema names a kind wherever an integer encoding is accepted (a
field's type, a ``length:`` prefix, a repeat's ``prefix:``), directly or through a named
type carrying the kind's params (``types: {octal12: {integer: ascii, radix: 8, width:
12}}``).

A kind's ``decode(buf, offset, *, path, **params) -> (value, end)`` reads one integer
starting at ``offset`` of ``buf`` (cut at the end of the enclosing region) and raises the
project's errors with absolute offsets; ``encode(value, **params) -> bytes`` is canonical
and raises :class:`EncodeError` for a value it cannot write.

Built-ins: ``uleb128``, ``sleb128``, ``zigzag`` (LEB128 family), ``vlq`` (big-endian
7-bit groups, MIDI variable-length quantity), ``vlq_offset`` (the same with one added per
continuation, git pack OFS_DELTA offsets), ``quic_varint`` (RFC 9000 §16: two-bit length
prefix), ``vint`` (the first byte's leading zero bits count the bytes that follow, as
EBML/Matroska sizes) and ``ascii`` (digits in a fixed width: tar, ar, cpio headers).
"""

from __future__ import annotations

from typing import Any

import construct as cs

from . import varint
from .errors import ConstraintError, DecodeError, EncodeError, TruncatedError
from .truth import note

Buffer = bytes | bytearray | memoryview
U64_MAX = (1 << 64) - 1


def _int_arg(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"{what} value must be an int, got {type(value).__name__}")
    return value


def _truncated(what: str, offset: int, path: str, need: Any, have: int) -> TruncatedError:
    return TruncatedError(f"buffer ends inside a {what}", offset=offset, path=path,
                          expected=need, found=f"end of buffer after {have} byte(s)")


# -- big-endian 7-bit groups (MIDI VLQ, git OFS_DELTA) ---------------------------------

def decode_vlq(buf: Buffer, offset: int = 0, *, path: str = "", max_bytes: int = 4,
               add_one: bool = False) -> tuple[int, int]:
    """Big-endian 7-bit groups, high bit = another byte follows; ``add_one``: each
    continuation adds one before the shift (git's offset encoding: no redundant forms)."""
    what = "VLQ offset" if add_one else "VLQ"
    value, pos, end = 0, offset, len(buf)
    while True:
        if pos >= end:
            raise _truncated(what, offset, path, "continuation byte", pos - offset)
        if pos - offset >= max_bytes:
            raise ConstraintError(f"{what} longer than {max_bytes} bytes", offset=offset,
                                  path=path, expected=f"<= {max_bytes} bytes",
                                  found=f"> {max_bytes} bytes")
        byte = buf[pos]
        if add_one and pos > offset:
            value += 1
        value = (value << 7) | (byte & 0x7F)
        pos += 1
        if not byte & 0x80:
            if value > U64_MAX:
                raise ConstraintError(f"{what} value does not fit in 64 bits", offset=offset,
                                      path=path, expected=f"<= {U64_MAX}", found=value)
            return value, pos


def vlq_limit(max_bytes: int, add_one: bool) -> int:
    """The largest value ``max_bytes`` groups hold (values are at most 64-bit)."""
    if not add_one:
        return min((1 << (7 * max_bytes)) - 1, U64_MAX)
    return min(sum(1 << (7 * k) for k in range(1, max_bytes)) + (1 << (7 * max_bytes)) - 1,
               U64_MAX)


def encode_vlq(value: int, *, max_bytes: int = 4, add_one: bool = False) -> bytes:
    what = "VLQ offset" if add_one else "VLQ"
    value = _int_arg(value, what)
    limit = vlq_limit(max_bytes, add_one)
    if value < 0 or value > limit:
        raise EncodeError(f"{what} value {value} outside 0..{limit} ({max_bytes} bytes)")
    out = [value & 0x7F]
    value >>= 7
    while value:
        if add_one:
            value -= 1
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(out))


# -- QUIC variable-length integers (RFC 9000 §16) ---------------------------------------

def decode_quic(buf: Buffer, offset: int = 0, *, path: str = "") -> tuple[int, int]:
    if offset >= len(buf):
        raise _truncated("QUIC varint", offset, path, "1 byte", 0)
    first = buf[offset]
    n = 1 << (first >> 6)
    if offset + n > len(buf):
        raise _truncated("QUIC varint", offset, path, f"{n} bytes", len(buf) - offset)
    value = first & 0x3F
    for k in range(1, n):
        value = (value << 8) | buf[offset + k]
    return value, offset + n


def encode_quic(value: int) -> bytes:
    value = _int_arg(value, "QUIC varint")
    for n, prefix in ((1, 0), (2, 1), (4, 2), (8, 3)):
        if 0 <= value < 1 << (8 * n - 2):
            return (value | prefix << (8 * n - 2)).to_bytes(n, "big")
    raise EncodeError(f"QUIC varint value {value} outside 0..2**62-1")


# -- leading-zero-count length marker (EBML element sizes) -------------------------------

def decode_vint(buf: Buffer, offset: int = 0, *, path: str = "",
                max_bytes: int = 8) -> tuple[int, int]:
    """The first byte's leading zero bits count the bytes that follow; the marker bit
    (the first one bit) is not part of the value."""
    if offset >= len(buf):
        raise _truncated("vint", offset, path, "1 byte", 0)
    first = buf[offset]
    n = 9 - first.bit_length()  # total length: 1 for 1xxxxxxx ... 8 for 00000001
    if first == 0 or n > max_bytes:
        raise ConstraintError("vint length marker missing", offset=offset, path=path,
                              expected=f"a one bit in the first {max_bytes} bits",
                              found=f"0x{first:02x}")
    if offset + n > len(buf):
        raise _truncated("vint", offset, path, f"{n} bytes", len(buf) - offset)
    value = first & (0xFF >> n)
    for k in range(1, n):
        value = (value << 8) | buf[offset + k]
    return value, offset + n


def encode_vint(value: int, *, max_bytes: int = 8) -> bytes:
    """Shortest form whose value bits are not all ones (all ones is reserved: EBML's
    "unknown size")."""
    value = _int_arg(value, "vint")
    for n in range(1, max_bytes + 1):
        if 0 <= value < (1 << (7 * n)) - 1:
            return (value | 1 << (7 * n)).to_bytes(n, "big")
    raise EncodeError(f"vint value {value} outside 0..{(1 << (7 * max_bytes)) - 2}")


# -- ASCII digits in a fixed width (tar, ar, cpio) -----------------------------------------

_RADIX_NAMES = {8: "octal", 10: "decimal", 16: "hex"}
_BLANK = frozenset(b" \x00")


def decode_ascii(buf: Buffer, offset: int = 0, *, path: str = "", radix: int = 10,
                 width: int = 1, end: bytes = b"", align: str = "right",
                 upper: bool = False, blank: int | str | None = None
                 ) -> tuple[int | None, int]:
    """Digits within ``width`` bytes; lenient as readers of these formats are: leading
    spaces (and zeros), then at least one digit, then only NULs, spaces or bytes of the
    declared ``end``. A field of only NULs and spaces is ``blank`` when declared (an int,
    or ``"absent"``: ``None``), else refused."""
    if offset + width > len(buf):
        raise TruncatedError(f"{_RADIX_NAMES[radix]} number truncated", offset=offset,
                             path=path, expected=width, found=len(buf) - offset)
    raw = bytes(buf[offset:offset + width])
    if blank is not None and all(b in _BLANK for b in raw):
        return (None if blank == "absent" else blank), offset + width
    i = 0
    while i < width and raw[i] == 0x20:
        i += 1
    start = i
    while i < width and _digit(raw[i], radix) is not None:
        i += 1
    allowed = _BLANK | frozenset(end)
    if i == start or any(b not in allowed for b in raw[i:]):
        bad = i if i < width else start
        if i > start:
            bad = next(k for k in range(i, width) if raw[k] not in allowed)
        raise ConstraintError(f"invalid {_RADIX_NAMES[radix]} number", offset=offset + bad,
                              path=path, expected=f"{_RADIX_NAMES[radix]} digits",
                              found=raw[bad:bad + 1] if bad < width else raw)
    return int(raw[start:i], radix), offset + width


def _digit(b: int, radix: int) -> int | None:
    if 0x30 <= b <= 0x39:
        d = b - 0x30
    elif 0x61 <= b <= 0x66 or 0x41 <= b <= 0x46:
        d = (b | 0x20) - 0x61 + 10
    else:
        return None
    return d if d < radix else None


def encode_ascii(value: int | None, *, radix: int = 10, width: int = 1, end: bytes = b"",
                 align: str = "right", upper: bool = False,
                 blank: int | str | None = None) -> bytes:
    if value is None and blank == "absent":
        return bytes(width)  # an empty field: NULs (as tarfile writes one)
    value = _int_arg(value, _RADIX_NAMES[radix])
    room = width - len(end)
    text = format(value, {8: "o", 10: "d", 16: "X" if upper else "x"}[radix]) \
        if value >= 0 else ""
    if not text or len(text) > room:
        raise EncodeError(f"{_RADIX_NAMES[radix]} value {value} does not fit in {room} "
                          f"digit(s)")
    text = text.rjust(room, "0") if align == "right" else text.ljust(room, " ")
    return text.encode("ascii") + end


def _ascii_width(*, width: int = 1, **_: Any) -> int:
    return width


def _ascii_bounds(*, radix: int = 10, width: int = 1, end: bytes = b"", **_: Any
                  ) -> tuple[int, int]:
    return 0, radix ** (width - len(end)) - 1


def _check_ascii(*, radix: int = 10, width: int = 1, end: bytes = b"", align: str = "right",
                 upper: bool = False, blank: int | str | None = None) -> None:
    """Refuse params the kind cannot honour (the generator reports them as schema
    problems)."""
    if radix not in _RADIX_NAMES:
        raise ValueError(f"radix must be 8, 10 or 16, not {radix!r}")
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise ValueError(f"width must be a positive int, not {width!r}")
    if not isinstance(end, bytes) or len(end) >= width:
        raise ValueError("end must be bytes shorter than width")
    if align not in ("right", "left"):
        raise ValueError(f"align must be right or left, not {align!r}")
    if not isinstance(upper, bool):
        raise ValueError("upper must be true or false")
    if blank is not None and blank != "absent" and (
            not isinstance(blank, int) or isinstance(blank, bool) or blank < 0):
        raise ValueError("blank must be a non-negative int or 'absent'")


def _check_groups(*, max_bytes: int = 4) -> None:
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or not 1 <= max_bytes <= 16:
        raise ValueError(f"max_bytes must be 1..16, not {max_bytes!r}")


def _check_vint(*, max_bytes: int = 8) -> None:
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or not 1 <= max_bytes <= 8:
        raise ValueError(f"max_bytes must be 1..8, not {max_bytes!r}")


def register(reg: Any) -> None:
    """Register the built-in integer kinds (the same call a plug-in makes)."""
    reg.add_integer_kind("uleb128", decode=varint.decode_uleb128, encode=varint.encode_uleb128,
                         max_bytes=10, doc="unsigned LEB128 (64-bit)")
    reg.add_integer_kind("sleb128", decode=varint.decode_sleb128, encode=varint.encode_sleb128,
                         max_bytes=10, signed=True, doc="signed LEB128 (64-bit)")
    reg.add_integer_kind("zigzag", decode=varint.decode_zigzag, encode=varint.encode_zigzag,
                         max_bytes=10, signed=True, doc="ZigZag-mapped ULEB128 (sint64)")
    reg.add_integer_kind("vlq", decode=decode_vlq, encode=encode_vlq, max_bytes=4,
                         params=("max_bytes",), check=_check_groups,
                         bounds=lambda max_bytes=4: (0, vlq_limit(max_bytes, False)),
                         doc="big-endian 7-bit groups (MIDI variable-length quantity)")
    reg.add_integer_kind(
        "vlq_offset",
        decode=lambda buf, offset=0, *, path="", max_bytes=10:
            decode_vlq(buf, offset, path=path, max_bytes=max_bytes, add_one=True),
        encode=lambda value, *, max_bytes=10: encode_vlq(value, max_bytes=max_bytes,
                                                           add_one=True),
        max_bytes=10, params=("max_bytes",), check=_check_groups,
        bounds=lambda max_bytes=10: (0, vlq_limit(max_bytes, True)),
        doc="big-endian 7-bit groups, each continuation adds one (git OFS_DELTA)")
    reg.add_integer_kind("quic_varint", decode=decode_quic, encode=encode_quic, max_bytes=8,
                         bounds=(0, (1 << 62) - 1),
                         doc="two-bit length prefix: 1, 2, 4 or 8 bytes (RFC 9000 §16)")
    reg.add_integer_kind("vint", decode=decode_vint, encode=encode_vint, max_bytes=8,
                         bounds=lambda max_bytes=8: (0, (1 << (7 * max_bytes)) - 2),
                         params=("max_bytes",), check=_check_vint,
                         doc="leading zero bits of the first byte count the bytes that follow")
    reg.add_integer_kind("ascii", decode=decode_ascii, encode=encode_ascii,
                         max_bytes=_ascii_width,
                         params=("radix", "width", "end", "align", "upper", "blank"),
                         required=("radix", "width"), check=_check_ascii, bounds=_ascii_bounds,
                         fixed_width=True,
                         doc="ASCII digits in a fixed width (octal, decimal or hex)")


# -- the Construct path ---------------------------------------------------------------------

class IntegerKind(cs.Construct):
    """A registered integer kind on the Construct path, interpreted and compiled, with the
    fast path's exact rules and errors (``codec`` is the registry's bound kind)."""

    def __init__(self, codec: Any) -> None:
        super().__init__()
        self.codec = codec

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        data = stream.read(self.codec.max_bytes + 1)  # one more: "too long" as the fast path
        value, n = _decode_at(self.codec, data, at, _cpath(path))
        stream.seek(at + n)
        return value

    def _build(self, obj, stream, context, path):
        data = self.codec.encode(obj)
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):
        raise cs.SizeofError(f"{self.codec.name} integers have no fixed size", path=path)

    def _emitparse(self, code):
        code.append("from bytewright.runtime import numbers as _bwn")
        me = f"linkedinstances[{id(self)}]"
        self._compileinstance(code)
        return (f"_bwn.parse_stream(io, {me}.codec)")

    def _emitbuild(self, code):
        me = f"linkedinstances[{id(self)}]"
        self._compileinstance(code)
        return f"(io.write({me}.codec.encode(obj)), obj)[1]"


def _cpath(path: str | None) -> str:
    return (path or "").replace("(parsing) -> ", "").replace("(building) -> ", "") \
        .replace(" -> ", ".")


def _decode_at(codec: Any, data: bytes, at: int, path: str) -> tuple[int, int]:
    """Decode from ``data`` (read at stream position ``at``); errors get offsets of the
    stream (the runtime maps them to the user's buffer as for every Construct error)."""
    try:
        return codec.decode(data, 0, len(data), path)
    except DecodeError as exc:
        exc.offset = at + (exc.offset or 0)
        raise


def parse_stream(io: Any, codec: Any) -> int:
    """The compiled parser's read of one integer of ``codec``'s kind."""
    at = io.tell()
    value, n = _decode_at(codec, io.read(codec.max_bytes + 1), at, "")
    io.seek(at + n)
    return value


# -- bit fields ----------------------------------------------------------------------------

def bit_part(value: Any, width: int, path: str, *, lo: int | None = None,
             hi: int | None = None, members: tuple[int, ...] | None = None) -> int:
    """The integer a bit field packs: an int (a bool or an enum member is one) that fits
    ``width`` bits and the field's range and enum, else :class:`EncodeError` on ``path``."""
    if isinstance(value, bool) or not isinstance(value, int):
        if not isinstance(value, bool):
            raise EncodeError(f"bit field value must be an int, got {type(value).__name__}",
                              path=path)
    v = int(value)
    if not 0 <= v < 1 << width:
        raise EncodeError(f"value {v} does not fit in {width} bit(s)", path=path)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise EncodeError(f"value {v} out of range {lo}..{hi}", path=path)
    if members is not None and v not in members:
        raise EncodeError(f"value {v} is not a member (expected one of {list(members)})",
                          path=path)
    return v


# -- absent values ---------------------------------------------------------------------------

class Absent(cs.Construct):
    """A length- or count-prefixed field whose prefix may be ``sentinel``: then the value
    is ``None`` (nothing follows), and ``None`` builds as the sentinel. ``prefix`` is the
    prefix's own construct, ``subcon`` the whole field (prefix included)."""

    flagbuildnone = True

    def __init__(self, sentinel: int, prefix: Any, subcon: Any, label: str = "length") -> None:
        super().__init__()
        self.sentinel, self.prefix, self.subcon = sentinel, prefix, subcon
        self.label = label  # the prefix's name in errors: "length" or "count"

    def _parse(self, stream, context, path):
        at = cs.stream_tell(stream, path)
        try:
            n = self.prefix._parsereport(stream, context, path)
        except (cs.StreamError, DecodeError) as exc:
            # reported on the prefix itself (``field.length``), as the fast path does
            err = exc if isinstance(exc, DecodeError) else TruncatedError(
                f"{self.label} truncated", offset=at, path="")
            if err.offset is None:
                err.offset = at
            note(err, at, self.label)
            raise err from None
        if n == self.sentinel:
            return None
        if n < 0:
            raise ConstraintError(f"negative {'size' if self.label == 'length' else 'count'}",
                                  offset=cs.stream_tell(stream, path), path="",
                                  expected=">= 0", found=n)
        stream.seek(at)
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            self.prefix._build(self.sentinel, stream, context, path)
            return None
        if self.sentinel >= 0 and len(obj.encode("utf-8") if isinstance(obj, str)
                                      else obj) == self.sentinel:
            raise EncodeError(f"its length is the sentinel of an absent value "
                              f"({self.sentinel})", path=_cpath(path))
        return self.subcon._build(obj, stream, context, path)

    def _sizeof(self, context, path):
        raise cs.SizeofError("a value that may be absent has no fixed size", path=path)

    def _emitparse(self, code):
        self._compileinstance(code)
        return f"linkedinstances[{id(self)}]._parse(io, this, '(parsing)')"

    def _emitbuild(self, code):
        self._compileinstance(code)
        return f"linkedinstances[{id(self)}]._build(obj, io, this, '(building)')"
