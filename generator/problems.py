"""Problems as values: every pass returns them instead of raising on the first one.

Modelled on Kaitai Struct's compiler: a problem names the file, the line and the YAML
path, so an editor (or a human) can jump straight to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Problem:
    """One finding of a pass: ``severity`` is ``error`` or ``warning``."""

    file: str
    line: int | None
    path: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        loc = self.file
        if self.line is not None:
            loc += f":{self.line}"
        return f"{loc}: {self.severity}: {self.path or '<root>'}: {self.message}"


@dataclass
class Problems:
    """An ordered collection of problems with a source map for line lookup."""

    items: list[Problem] = field(default_factory=list)

    def add(self, file: str, line: int | None, path: str, message: str,
            severity: str = "error") -> None:
        self.items.append(Problem(file, line, path, message, severity))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "error"]

    def __bool__(self) -> bool:
        return bool(self.errors)

    def __iter__(self):
        return iter(self.items)

    def extend(self, other: Problems) -> None:
        self.items.extend(other.items)


class Checker(Protocol):
    """What a checking module asks of the resolve pass it serves (``resolve.Resolver``):
    the family's enums and aliases so far, a way to report a problem at a YAML path,
    and the expressions a field's keys hold. Typed here so the checkers need not import
    the pass that calls them."""

    enums: dict
    aliases: dict

    def err(self, src: Any, path: str, message: str) -> None: ...

    def exprs_of(self, *args: Any, **kwargs: Any) -> Any: ...
