"""Resolve and check the number constructs: named integer kinds with params (``types:
{NAME: {integer: KIND, ...}}``), bit fields (``bits:`` on an integer field) and absent
values (``absent:`` sentinels of lengths and counts)."""

from __future__ import annotations

from typing import Any

from ..runtime import registry
from . import ir
from .yamlsource import Source, join

_TYPE_KEYS = frozenset({"integer", "doc"})


def _param_value(key: str, value: Any) -> Any:
    """A param as the kind receives it: ``"hex:0020"`` is bytes; ``end`` (the bytes after
    ASCII digits) written as text is its latin-1 bytes."""
    if isinstance(value, str) and value.startswith("hex:"):
        return bytes.fromhex(value[4:])
    if key == "end" and isinstance(value, str):
        return value.encode("latin-1")
    return value


def integer_type(res: Any, src: Source, path: str, name: str, body: dict) -> ir.VarintT | None:
    """A named type giving a registered integer kind its params."""
    kind = body.get("integer")
    spec = registry.REGISTRY.integer_kinds.get(kind)
    if spec is None:
        res.err(src, join(path, "integer"),
                f"unknown integer kind {kind!r} (registered: "
                f"{', '.join(sorted(registry.REGISTRY.integer_kinds))})")
        return None
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in _TYPE_KEYS:
            continue
        if key not in spec.params:
            res.err(src, join(path, key),
                    f"integer kind {kind!r} has no param {key!r} (params: "
                    f"{', '.join(spec.params) or 'none'})")
            continue
        try:
            params[key] = _param_value(key, value)
        except ValueError as exc:
            res.err(src, join(path, key), f"bad {key}: {exc}")
            return None
    missing = [k for k in spec.required if k not in params]
    if missing:
        res.err(src, path, f"integer kind {kind!r} needs {', '.join(missing)}")
        return None
    if spec.check is not None:
        try:
            spec.check(**params)
        except (ValueError, TypeError) as exc:
            res.err(src, path, f"integer kind {kind!r}: {exc}")
            return None
    codec = registry.REGISTRY.integer_codec(kind, params)
    return ir.VarintT(kind=kind, params=tuple(sorted(params.items())), alias=name,
                      is_signed=spec.signed, max_bytes=codec.max_bytes)
