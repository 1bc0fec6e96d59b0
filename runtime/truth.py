"""The encoder contract every generated module keeps: an encoder returns bytes that decode
to the value it was given, or raises :class:`EncodeError` with the field path.

``encode_failure`` turns whatever a value of the wrong type, range or shape made an
encoder raise (``struct.error``, ``KeyError`` from a missing member, Construct's own
errors) into that one error; ``roundtrip`` checks written bytes by decoding them, for
records whose layout depends on what the encoder cannot know (bytes left in a region).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import DecodeError, EncodeError

_SEGMENT = re.compile(r"^\(\w+\) -> ")


def construct_path(path: str | None) -> str:
    """A Construct path (``(building) -> a -> [2] -> b``) as a field path (``a[2].b``)."""
    text = _SEGMENT.sub("", path or "").replace(" -> ", ".")
    return text.replace(".[", "[")


def encode_failure(exc: BaseException, record: str) -> EncodeError:
    """The project's error for anything an encoder of ``record`` raised on a value."""
    segs = exc.__dict__.get("_bw_segs")
    if isinstance(exc, EncodeError) and not segs:
        inner = exc.path
        return EncodeError(exc.message, path=record + ("." + inner if inner and not
                                                        inner.startswith("[") else inner))
    if isinstance(exc, EncodeError):
        where = "".join(s if s.startswith("[") else "." + s for s in segs)
        return EncodeError(exc.message, path=record + where)
    where = "".join(s if s.startswith("[") else "." + s for s in segs) if segs else \
        ("." + construct_path(getattr(exc, "path", None)) if getattr(exc, "path", None) else "")
    where = where.replace("..", ".")
    lines = str(exc).split("\n")  # (KeyError: a missing field or a non-member)
    # Construct puts "Error in path (building) -> x" first and the reason after it
    message = next((x for x in lines if x and not x.startswith("Error in path")), lines[0])
    if type(exc).__name__ == "CheckError":  # Construct's text names no rule
        message = "the value breaks a rule of the layout (a range, an assert or a condition)"
    return EncodeError(f"cannot encode: {type(exc).__name__}: {message}",
                       path=(record + where).rstrip("."))


def fast_failure(exc: BaseException, record: str, reference: Callable[..., Any], value: Any,
                 **params: Any) -> EncodeError:
    """The fast (or compiled Construct) encoder's failure as the reference (interpreted
    Construct) encoder reports it: the fast path packs fixed runs whole and inlines nested
    records, compiled code notes no member or list index, so what they raised may not name
    the field; the reference, run again on the failure path only, does."""
    own = encode_failure(exc, record)
    try:
        reference(value, **params)
    except EncodeError as ref:
        return ref
    return own


def roundtrip(decode: Callable[..., Any], data: bytes, value: Any, record: str,
              **params: Any) -> bytes:
    """``data`` when it decodes (whole) to ``value``, else :class:`EncodeError`."""
    try:
        got = decode(data, **params)
    except DecodeError as exc:
        raise EncodeError(f"the bytes written do not decode ({exc}): the layout depends on "
                          "what only a decoder knows", path=record) from None
    end = len(data)
    if isinstance(got, tuple):
        got, end = got
    try:
        same = end == len(data) and got == value
    except (TypeError, ValueError):  # numpy members: compare by text
        same = end == len(data) and repr(got) == repr(value)
    if not same:
        raise EncodeError("the bytes written decode to another value: the layout depends on "
                          "what only a decoder knows (bytes left in the region)", path=record)
    return data


# -- the Construct path's decode errors: where and in which field --------------------------
# Construct reports neither offsets nor list indices. Each record member, array item and
# sub-stream a failure leaves through notes them on the exception (``_bw_segs``: the path
# from the record down; ``_bw_off``: the offset, relative to the stream being read until a
# sub-stream adds its base), and ``construct_error`` builds the project's error from them.

def note(exc: BaseException, start: int, name: str | None) -> None:
    """``exc`` leaves the record member ``name`` that starts at ``start``."""
    segs = exc.__dict__.setdefault("_bw_segs", [])
    if exc.__dict__.pop("_bw_measured", False):
        name = None  # built ahead to measure a sibling (``build_bytes``): already named
    if name:
        segs.insert(0, name)
    if exc.__dict__.get("_bw_off") is None:
        off = exc.offset if isinstance(exc, DecodeError) else None
        exc._bw_off = start if off is None else off  # type: ignore[attr-defined]


def note_index(exc: BaseException, index: int, start: int) -> None:
    """``exc`` leaves item ``index`` (starting at ``start``) of an array."""
    exc.__dict__.setdefault("_bw_segs", []).insert(0, f"[{index}]")
    if exc.__dict__.get("_bw_off") is None:
        off = exc.offset if isinstance(exc, DecodeError) else None
        exc._bw_off = start if off is None else off  # type: ignore[attr-defined]


def shift(exc: BaseException, base: int) -> None:
    """``exc`` leaves a sub-stream that starts at ``base`` of the outer one."""
    off = exc.__dict__.get("_bw_off")
    if off is None and isinstance(exc, DecodeError):
        off = exc.offset
    if off is not None:
        exc._bw_off = off + base  # type: ignore[attr-defined]


def pin(exc: BaseException, at: int) -> None:
    """``exc`` is reported at ``at`` (a compressed frame's start: inner offsets are not
    offsets of the input)."""
    exc._bw_off = at  # type: ignore[attr-defined]


def noted_path(exc: BaseException, record: str) -> str | None:
    segs = exc.__dict__.get("_bw_segs")
    if segs is None:
        return None
    return record + "".join(s if s.startswith("[") else "." + s for s in segs)


def case_value(value: Any, tag: Any, classes: dict, default: Any, field: str) -> Any:
    """A switch body given to the Construct path's encoder: the record its tag selects."""
    want = classes.get(tag, default)
    if tag in classes and want is None and value is not None:
        raise EncodeError(f"tag {tag!r} carries no body", path=field)
    if want is not None and value is not None and value.__class__ is not want:
        raise EncodeError(f"tag {tag!r} takes a {want.__name__}, not "
                          f"{type(value).__name__}", path=field)
    return value


def compiled_failure(own: DecodeError, reference: Callable[..., Any], buf: Any, offset: int,
                     **params: Any) -> DecodeError:
    """The compiled Construct parser's failure as the interpreted one reports it: compiled
    code notes neither the members nor the list items a failure leaves through, so the
    interpreted parser, run again on the failure path only, names the field and offset
    (``own`` when it, unlike the compiled one, accepts the input)."""
    try:
        reference(buf, offset, **params)
    except DecodeError as ref:
        return ref
    return own


def encode_many_checked(enc: Callable[..., Any], decode: Callable[..., Any], name: str,
                        values: Any, params: tuple, kw: dict) -> bytes:
    """``encode_many_*`` for records whose layout depends on bytes left in a region: each
    record is decoded back where it lies in the whole buffer (its ``_remaining`` runs to
    the buffer's end, so a record that reads to the end would swallow the next one) and
    must give its value and end where the next begins, else :class:`EncodeError`."""
    values = list(values)
    out = bytearray()
    starts: list[int] = []
    for i, value in enumerate(values):
        starts.append(len(out))
        try:
            enc(out, value, *params)
        except Exception as exc:  # noqa: BLE001 - every failure is the item's EncodeError
            raise encode_failure(exc, f"{name}[{i}]") from None
    data = bytes(out)
    for i, (value, start) in enumerate(zip(values, starts, strict=True)):
        stop = starts[i + 1] if i + 1 < len(starts) else len(data)
        where = f"{name}[{i}]"
        try:
            got, end = decode(data, start, **kw)
        except DecodeError as exc:
            raise EncodeError(f"the bytes written do not decode ({exc}): the layout depends "
                              "on what only a decoder knows", path=where) from None
        try:
            held = got == value
        except (TypeError, ValueError):  # numpy members: compare by text
            held = repr(got) == repr(value)
        if end != stop or not held:
            raise EncodeError("the bytes written decode to another value: the layout "
                              "depends on what only a decoder knows (bytes left in the "
                              "region)", path=where)
    return data
