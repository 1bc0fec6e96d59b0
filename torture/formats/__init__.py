"""One adapter per shipped format: how the harness creates, writes, maintains and checks it.

Each adapter is a :class:`~bytewright.torture.formats.base.Format`. Adapters are imported
on first use (:func:`load`), so a format whose runtime does not import fails its own
scenarios, not the whole harness.
"""

from __future__ import annotations

import importlib

from .base import Format, Session

# command-line name -> (module, class)
_ADAPTERS = {
    "htt": ("htt", "Htt"),
    "kladde": ("kladde", "Kladde"),
    "pile": ("pile", "PileFormat"),
    "ze": ("ze", "ZeWal"),
}
NAMES: tuple[str, ...] = tuple(sorted(_ADAPTERS))
_LOADED: dict[str, Format] = {}


def load(name: str) -> Format:
    """The adapter for ``name`` (imports its runtime the first time)."""
    fmt = _LOADED.get(name)
    if fmt is None:
        module, cls = _ADAPTERS[name]
        fmt = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
        _LOADED[name] = fmt
    return fmt


__all__ = ["NAMES", "Format", "Session", "load"]
