"""Mistakes in a project's ``<family>_cases.py``, told as the user's own, in one line.

A cases module is the user's Python: a misspelt field, a missing one, a syntax error or a
value the layout refuses is a mistake in that file (exit 2), not a bug of bytewright. The
message names the file, the line where Python stopped in it, the case and the field.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..runtime.errors import BytewrightError
from . import common


def _line_in(path: Path, exc: BaseException) -> int | None:
    """The last line of ``path`` the traceback passed through (None: it never did)."""
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename) == path:
        return exc.lineno
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _what(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"{type(exc).__name__}: {exc.msg}"
    text = str(exc)
    if ".__init__()" in text:  # a record's constructor: its arguments are fields
        text = text.replace(".__init__()", "()")
        text = re.sub(r"(?:positional |keyword )?argument(s?)", r"field\1", text)
    return text if isinstance(exc, BytewrightError) else f"{type(exc).__name__}: {text}"


@contextmanager
def blame(path: Path, shown: str, case: str | None = None) -> Iterator[None]:
    """Re-raise an error of the user's cases module as a one-line ``UsageError``.

    Errors raised in the cases file and a value the layout refuses (``case`` given) are the
    user's; any other error inside bytewright stays what it is.
    """
    try:
        yield
    except common.CliError:
        raise
    except Exception as exc:
        line = _line_in(path, exc)
        if line is None and not (case is not None and isinstance(exc, BytewrightError)):
            raise
        where = f"{shown}:{line}" if line is not None else shown
        in_case = f"case {case!r}: " if case is not None else ""
        raise common.UsageError(f"{where}: {in_case}{_what(exc)}") from exc


def unpack(item: Any, shown: str) -> tuple[str, str, dict[str, Any], Any, str]:
    """One yielded case as ``(name, record, params, value, doc)``, or a one-line error."""
    if not isinstance(item, tuple) or len(item) != 5:
        raise common.UsageError(f"{shown}: cases() must yield (name, record, params, value, "
                                f"doc); got {type(item).__name__} {item!r:.60}")
    if not isinstance(item[2], dict):
        raise common.UsageError(f"{shown}: case {item[0]!r}: params must be a dict, got "
                                f"{type(item[2]).__name__}")
    return item  # type: ignore[return-value]


def check_params(encoder: Callable[..., bytes], case: tuple[Any, ...], shown: str) -> None:
    """Refuse params the record's encoder does not take (or lacks), naming them."""
    name, record, params, value = case[:4]
    try:
        inspect.signature(encoder).bind(value, **params)
    except TypeError as exc:
        raise common.UsageError(f"{shown}: case {name!r}: params of {record}: {exc}") from exc
