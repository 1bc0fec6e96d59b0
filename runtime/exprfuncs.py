"""Checked forms of the schema expression functions, for generated decoders.

``int(x)`` / ``int(x, base)`` read digits (ASCII octal sizes of tar, hex lengths): bytes
that are not digits of that base are a decode error of the field being read, with its
offset, as on the Construct path, not a ``ValueError``.
"""

from __future__ import annotations

from typing import Any

from .errors import ConstraintError


def int_of(*args: Any, offset: int, path: str) -> int:
    """``int(*args)``; a value that is not a number is a ``ConstraintError``."""
    try:
        return int(*args)
    except (ValueError, TypeError) as exc:
        raise ConstraintError(f"{type(exc).__name__}: {exc}", offset=offset, path=path,
                              found=args[0] if args else None) from None
