"""Load a schema YAML file into plain Python data plus a map from YAML path to line.

PyYAML's composer keeps node marks; we walk the node tree ourselves so every mapping
key and sequence item keeps its 1-based line. Paths look like
``records.wal_entry.fields[3].type`` — the same spelling problems use.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Source:
    """A loaded schema file: its data, its text, and where every path sits."""

    file: str
    text: str
    data: Any
    lines: dict[str, int]
    path: Path | None = None  # where it was read from (imports resolve next to it)

    def line(self, path: str) -> int | None:
        """Line of ``path``, or of its nearest ancestor that has one."""
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _convert(node: yaml.Node, path: str, lines: dict[str, int], scalar: Any) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = yaml.safe_load(yaml.serialize(key_node)) if not isinstance(
                key_node, yaml.ScalarNode) else scalar(key_node)
            sub = join(path, str(key))
            lines[sub] = key_node.start_mark.line + 1
            out[key] = _convert(value_node, sub, lines, scalar)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, join(path, i), lines, scalar)
                for i, item in enumerate(node.value)]
    return scalar(node)


def _scalars() -> Any:
    """A scalar node's value, by YAML's safe rules; one constructor for a whole file."""
    constructor = yaml.SafeLoader("")
    return lambda node: constructor.construct_object(node, deep=True)


def load_text(text: str, file: str) -> Source:
    """Parse ``text``; YAML syntax errors propagate as ``yaml.YAMLError`` with marks."""
    try:  # libyaml composes ten times faster; the same nodes, tags and marks
        node = yaml.compose(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:  # report the pure-Python parser's words for the error
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    lines: dict[str, int] = {}
    data = _convert(node, "", lines, _scalars()) if node is not None else None
    return Source(file=file, text=text, data=data, lines=lines)


def load_file(path: Path) -> Source:
    return load_text(path.read_text(encoding="utf-8"), str(path))
