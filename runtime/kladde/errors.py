"""kladde's errors, all in the project's one hierarchy (``BytewrightError``).

The variants follow the reference implementation (facts.md §7.3): ``Corrupt`` for every
format violation, ``NotKladde`` when neither header slot even has the magic,
``UnsupportedVersion`` for a ``min_reader_version`` above ours. Every decode failure names
the page in its message and carries the absolute file offset in ``offset``.
"""

from __future__ import annotations

from ..errors import BytewrightError, DecodeError, EncodeError, UnsupportedError


class KladdeError(DecodeError):
    """A kladde file that cannot be read; ``page`` is the page at fault (or None)."""

    def __init__(self, message: str, *, page: int | None = None, offset: int | None = None,
                 path: str = "", expected=None, found=None, file: str | None = None) -> None:
        if page is not None and f"page {page}" not in message:
            message = f"page {page}: {message}"
        super().__init__(message, offset=offset, path=path, expected=expected, found=found,
                         file=file)
        self.page = page


class Corrupt(KladdeError):
    """Any format violation: a bad reachable page, a broken tree, a statement out of bounds."""


class NotKladde(KladdeError):
    """Shorter than one page, or neither header slot carries the magic."""


class UnsupportedVersion(KladdeError, UnsupportedError):
    """The governing header's ``min_reader_version`` is above this reader's version."""

    def __init__(self, message: str, *, min_reader_version: int, **kw) -> None:
        super().__init__(message, **kw)
        self.min_reader_version = min_reader_version


class OutOfBounds(EncodeError):
    """A writer bound was exceeded (ids, sizes, offsets past 2**32 - 1...)."""


class DanglingPointer(BytewrightError, KeyError):
    """Reading an allocation id that does not exist."""

    def __init__(self, alloc_id: int) -> None:
        super().__init__(f"allocation {alloc_id} does not exist")
        self.alloc_id = alloc_id

    def __str__(self) -> str:
        return self.args[0]


class Poisoned(BytewrightError):
    """An earlier write to the file failed, so the store's memory may no longer match the
    file (a transaction half written, or written but not known to be durable). Every later
    operation raises this; reopening the file recovers its durable state."""

    def __init__(self, file: str | None, cause: BaseException) -> None:
        what = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        super().__init__(f"{file or 'kladde store'}: an earlier write failed ({what}); the "
                         "store may no longer match the file: close it and reopen the file "
                         "(reopening recovers the durable state)")
        self.file = file
        self.cause = cause
