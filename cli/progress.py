"""A one-line progress display on stderr for verbs whose steps can take seconds.

Shown only when stderr is a terminal: piped or captured output (CI logs, tests, a
redirect) never sees it, so machine-readable output stays clean. The line is rewritten
in place and erased when the verb is done.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``progress(step)`` shows ``VERB: step...``; ``done()`` erases it."""

    def __init__(self, verb: str, stream: TextIO | None = None) -> None:
        self.verb = verb
        self.stream = stream if stream is not None else sys.stderr
        self.active = _is_tty(self.stream)
        self.shown = False
        self.started = time.monotonic()

    def __call__(self, step: str) -> None:
        if not self.active:
            return
        elapsed = time.monotonic() - self.started
        self.stream.write(f"\r\x1b[K{self.verb}: {step}... ({elapsed:.0f} s)")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.done()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream: no display
        return False
