"""The same-epoch no-conflict rules (spec "No conflicts within each epoch").

Readers do not need them to resolve a file (facts.md §4.3), so the loader does not check
them; this validator does, for writers' tests and ``bytewright kladde`` tooling. Rules,
per id and epoch:

- existence: a Tombstone is the only statement naming its id in its epoch;
- no content byte is named twice (Ref, Zero, Inline ranges are pairwise disjoint);
- at most one Shrink and at most one Grow, never both;
- no Ref, Zero or Inline reaches past a same-epoch Shrink's ``n``;
- (facts.md §5.5, writer-illegal) no zero-length Ref or Zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Corrupt
from .model import GROW, INLINE, REF, SHRINK, TOMBSTONE, ZERO, Stmt


@dataclass(frozen=True)
class Conflict:
    message: str
    statement: Stmt
    other: Stmt | None = None


def conflicts(statements: list[Stmt]) -> list[Conflict]:
    """Every same-epoch conflict among ``statements`` (any order)."""
    groups: dict[tuple[int, int], list[Stmt]] = {}
    for st in statements:
        groups.setdefault((st.id, st.epoch), []).append(st)
    out: list[Conflict] = []
    for (alloc_id, epoch), sts in sorted(groups.items()):
        where = f"id {alloc_id}, epoch {epoch}"
        tombs = [s for s in sts if s.kind == TOMBSTONE]
        if tombs and len(sts) > 1:
            other = next(s for s in sts if s is not tombs[0])
            out.append(Conflict(f"{where}: a Tombstone and another statement contradict "
                                f"({other.describe()})", tombs[0], other))
        shrinks = [s for s in sts if s.kind == SHRINK]
        grows = [s for s in sts if s.kind == GROW]
        if len(shrinks) > 1:
            out.append(Conflict(f"{where}: more than one Shrink", shrinks[1], shrinks[0]))
        if len(grows) > 1:
            out.append(Conflict(f"{where}: more than one Grow", grows[1], grows[0]))
        if shrinks and grows:
            out.append(Conflict(f"{where}: both a Shrink and a Grow", grows[0], shrinks[0]))
        content = sorted((s for s in sts if s.kind in (REF, ZERO, INLINE)),
                         key=lambda s: (s.offset, s.size))
        for s in content:
            if s.size == 0:
                out.append(Conflict(f"{where}: zero-length {s.describe()} (writer-illegal)", s))
        for a, b in zip(content, content[1:], strict=False):
            if b.offset < a.offset + a.size and b.size and a.size:
                out.append(Conflict(f"{where}: content byte {b.offset} named twice "
                                    f"({a.describe()} and {b.describe()})", b, a))
        for sh in shrinks:
            for s in content:
                if s.offset + s.size > sh.offset:
                    out.append(Conflict(f"{where}: {s.describe()} reaches past the same-epoch "
                                        f"Shrink({alloc_id}, {sh.offset})", s, sh))
    return out


def check_no_conflicts(kfile) -> None:
    """Raise :class:`Corrupt` (page and offset of the statement) at the first conflict."""
    found = conflicts(kfile.statements)
    if found:
        c = found[0]
        st = c.statement
        raise Corrupt(f"same-epoch conflict in page {st.page}, statement {st.index}: "
                      f"{c.message}", page=st.page, offset=kfile.locate(st),
                      path=f"statements[{st.index}]")
