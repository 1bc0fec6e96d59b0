"""Schema imports: ``imports: [{from: common.yaml, records: [...], enums: [...]}]``.

An importing schema uses named definitions of another schema file of the project. The
definitions are *included*: the loader adds them to the importing family as a source of
their own (the imported file, its text and its line numbers, limited to what was named and
what that needs), so the generated module holds its own copy under the same class names
and every problem in an imported definition is reported at its own file and line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .problems import Problems
from .yamlsource import Source, join

KINDS = ("records", "enums", "flags", "types")
_PRIMITIVE_PREFIXES = ("u", "i", "f")


def expand(sources: list[Source], problems: Problems,
           load: Callable[[Path], Source | None]) -> list[Source]:
    """``sources`` plus one filtered source per imported file (after its importer)."""
    out: list[Source] = []
    for src in sources:
        out.append(src)
        for i, imp in enumerate(src.data.get("imports") or []):
            at = join("imports", i)
            included = _one(src, at, imp, problems, load)
            if included is not None:
                out.append(included)
    return out


def _one(src: Source, at: str, imp: dict, problems: Problems,
         load: Callable[[Path], Source | None]) -> Source | None:
    path = (src.path.parent if src.path is not None else Path(".")) / imp["from"]
    other = load(path)
    if other is None:
        problems.add(src.file, src.line(join(at, "from")), join(at, "from"),
                     f"cannot import {imp['from']!r}: no such schema file next to this one")
        return None
    if other.data.get("imports"):
        problems.add(src.file, src.line(join(at, "from")), join(at, "from"),
                     f"{imp['from']!r} imports from other files itself: import from the "
                     "file that defines the names")
        return None
    mine = (src.data.get("endian", "le"), other.data.get("endian", "le"))
    if mine[0] != mine[1]:
        problems.add(src.file, src.line(join(at, "from")), join(at, "from"),
                     f"{imp['from']!r} has endian {mine[1]!r}, this file {mine[0]!r}: "
                     "unsuffixed types would change meaning (give both the same endian)")
        return None
    wanted: dict[str, set[str]] = {k: set() for k in KINDS}
    for kind in KINDS:
        table = other.data.get(kind) or {}
        for j, name in enumerate(imp.get(kind) or []):
            if name not in table:
                problems.add(src.file, src.line(join(join(at, kind), j)), join(join(at, kind), j),
                             f"{imp['from']!r} defines no {kind[:-1] if kind != 'flags' else 'flags'} "
                             f"{name!r}")
                continue
            if name in (src.data.get(kind) or {}):
                problems.add(src.file, src.line(join(join(at, kind), j)), join(join(at, kind), j),
                             f"{name!r} is imported and also defined in this file")
                continue
            wanted[kind].add(name)
    _close(other.data, wanted)
    data: dict[str, Any] = {"bytewright": 1, "family": src.data.get("family")}
    for kind in KINDS:
        table = other.data.get(kind) or {}
        picked = {n: table[n] for n in table if n in wanted[kind]}
        if picked or kind == "records":
            data[kind] = picked
    if other.data.get("plugins"):
        data["plugins"] = list(other.data["plugins"])
    return Source(file=other.file, text=other.text, data=data, lines=other.lines,
                  path=other.path)


def _close(data: dict, wanted: dict[str, set[str]]) -> None:
    """Add every definition the wanted ones reference (records, enums, flags, types)."""
    tables = {k: data.get(k) or {} for k in KINDS}

    def need(name: Any) -> None:
        if not isinstance(name, str):
            return
        for kind in KINDS:
            if name in tables[kind] and name not in wanted[kind]:
                wanted[kind].add(name)
                todo.append((kind, name))

    todo = [(k, n) for k in KINDS for n in wanted[k]]
    while todo:
        kind, name = todo.pop()
        body = tables[kind][name] or {}
        if kind == "records":
            for fb in body.get("fields") or []:
                if not isinstance(fb, dict):
                    continue
                need(fb.get("type"))
                for target in (fb.get("cases") or {}).values():
                    need(target)
                if "switch" in fb:
                    need(fb.get("default"))
            for p in (body.get("params") or {}).values():
                need((p or {}).get("type"))
        elif kind == "flags":
            for bit in (body.get("bits") or {}).values():
                if isinstance(bit, dict):
                    need(bit.get("enum"))
