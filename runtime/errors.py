"""The project's one error hierarchy.

Every decode failure, on any input bytes, surfaces as a :class:`BytewrightError`
subclass carrying the byte offset, the field path (``wal_entry[17].body.meta[2].value``),
what was expected and what was found. Codecs never let ``struct.error``, ``IndexError``,
``UnicodeDecodeError`` or ``MemoryError`` escape.
"""

from __future__ import annotations

from typing import Any


class BytewrightError(Exception):
    """Base class of every error bytewright raises on purpose."""


class DecodeError(BytewrightError):
    """Bytes that do not decode as the layout says.

    ``offset`` is absolute within the buffer handed to the decoder; ``path`` is the field
    path from the outermost record; ``expected``/``found`` describe the mismatch.
    """

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        path: str = "",
        expected: Any = None,
        found: Any = None,
        file: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.path = path
        self.expected = expected
        self.found = found
        self.file = file

    def prefixed(self, segment: str) -> DecodeError:
        """Return self with ``segment`` prepended to the path (used while unwinding)."""
        if not segment:
            return self
        if not self.path:
            self.path = segment
        elif self.path.startswith("["):
            self.path = segment + self.path
        else:
            self.path = f"{segment}.{self.path}"
        return self

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        if self.path:
            where.append(self.path)
        text = self.message
        if self.expected is not None or self.found is not None:
            text += f" (expected {_show(self.expected)}, found {_show(self.found)})"
        return f"{': '.join(where)}: {text}" if where else text


class TruncatedError(DecodeError):
    """The buffer ends before the field does."""


class ChecksumError(DecodeError):
    """A stored checksum does not match the bytes it covers."""


class ConstraintError(DecodeError):
    """A magic, reserved-zero, enum, range or length rule was broken."""


class UnsupportedError(DecodeError):
    """Well-formed bytes this version of bytewright refuses (unknown version, algorithm)."""


class EncodeError(BytewrightError):
    """A value that cannot be encoded under the layout (out of range, wrong length...)."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.message = message
        self.path = path


class SchemaError(BytewrightError):
    """A schema problem, with file, line and YAML path. See ``generator.problems``."""


def _show(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex() or "''"
    if isinstance(value, int) and not isinstance(value, bool) and value > 9:
        return f"{value} (0x{value:x})"
    return repr(value)
