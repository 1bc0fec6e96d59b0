"""Benchmark: resolving a kladde address table against decoding it only.

The corpus is deterministic: ``n_statements`` statements over 8 epochs, one statement
per id per epoch (so no same-epoch conflicts), every form represented: Ref into a data
page, Inline, Zero, Grow, Shrink, Tombstone. Three rates, statements per second:

- ``decode_only``: the generated fast path alone — every reachable table page's
  content through ``decode_table_content`` (framing and CRC checked first);
- ``load``: ``runtime.kladde.load`` — header-slot choice, tree walk with every check,
  delta cursors and bounds, statements grouped for resolution;
- ``resolve``: ``load`` plus resolving every allocation (existence, size, content
  fragments by epoch, winning Ref pages checked).
"""

from __future__ import annotations

import gc
import time

from bytewright.generated import kladde as g
from bytewright.runtime.kladde import load
from bytewright.runtime.kladde import model as m
from bytewright.runtime.kladde.writer import frame_data, frame_header, frame_table, header_fields

EPOCHS = 8


def _stmt(epoch: int, alloc_id: int, data_addr: int) -> m.Stmt:
    """The statement id ``alloc_id`` gets in ``epoch`` (the forms rotate with the id)."""
    r = (alloc_id + epoch) % 7
    if epoch == EPOCHS and alloc_id % 10 == 0:
        return m.Stmt(alloc_id, m.TOMBSTONE, 0, 0, None, epoch)
    if r == 0:
        return m.Stmt(alloc_id, m.REF, 0, 16, data_addr + (alloc_id * 16) % 4064, epoch)
    if r == 1:
        return m.Stmt(alloc_id, m.INLINE, 4, 8, alloc_id.to_bytes(8, "little"), epoch)
    if r == 2:
        return m.Stmt(alloc_id, m.ZERO, 8, 4, None, epoch)
    if r == 3:
        return m.Stmt(alloc_id, m.GROW, 32, 0, None, epoch)
    if r == 4:
        return m.Stmt(alloc_id, m.SHRINK, 20, 0, None, epoch)
    if r == 5:
        return m.Stmt(alloc_id, m.INLINE, 0, 4, b"\x01\x02\x03\x04", epoch)
    return m.Stmt(alloc_id, m.REF, 2, 8, data_addr + (alloc_id * 8) % 4072, epoch)


def corpus(n_statements: int) -> bytes:
    """A whole kladde file holding ``n_statements`` statements."""
    from bytewright.runtime.kladde.writer import _deltas, pack_tables

    per_epoch = max(1, n_statements // EPOCHS)
    data_page = 2
    data_addr = data_page * m.PAGE_SIZE + m.CONTENT_OFFSET
    pages = [frame_data(bytes((i * 7) % 251 + 1 for i in range(m.MAX_PAGE_CONTENT)), 1)]
    children = []
    next_page = 3
    made = 0
    for epoch in range(1, EPOCHS + 1):
        count = per_epoch if epoch < EPOCHS else n_statements - made
        sts = [_stmt(epoch, i, data_addr) for i in range(1, count + 1)]
        made += count
        for content in pack_tables(sts):
            pages.append(frame_table(content, epoch))
            children.append(next_page)
            next_page += 1
    # the header names every table page (one interior level when there are many)
    interior = []
    if len(children) > 1000:
        for i in range(0, len(children), 700):
            pages.append(frame_table(g.TableContent(_deltas(children[i:i + 700]), []), EPOCHS))
            interior.append(next_page)
            next_page += 1
        children = interior
    head = frame_header(header_fields(journal_pointer=next_page), EPOCHS,
                        g.TableContent(_deltas(children), []))
    slots = head + bytes(m.PAGE_SIZE) if EPOCHS % 2 == 0 else bytes(m.PAGE_SIZE) + head
    return slots + b"".join(pages)


def run_decode_only(data: bytes) -> int:
    """Generated codecs only: every table page framed, checked and its content decoded."""
    mv = memoryview(data)
    n = 0
    hs, _ = g.decode_header_slot(mv[:2 * m.PAGE_SIZE], 0)
    queue = []
    start = m.HEADER_CONTENT_OFFSET
    content, _ = g.decode_table_content(mv[:start + len(hs.content)], start)
    n += len(content.statements)
    cur = 0
    for d in content.children:
        cur += d
        queue.append(cur)
    for p in queue:
        raw, _ = g.decode_page(mv, p * m.PAGE_SIZE)
        start = p * m.PAGE_SIZE + m.CONTENT_OFFSET
        content, _ = g.decode_table_content(mv[:start + len(raw.content)], start)
        n += len(content.statements)
        cur = 0
        for d in content.children:
            cur += d
            queue.append(cur)
    return n


def run_load(data: bytes) -> int:
    f = load(data)
    f.by_id  # noqa: B018 - group for resolution, as resolve does
    return len(f.statements)


def run_resolve(data: bytes) -> int:
    f = load(data)
    allocs = f.allocations()
    return len(allocs)


def timed(fn, *args, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(*args)
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def bench(n_statements: int = 1_000_000, repeat: int = 2) -> dict:
    t0 = time.perf_counter()
    data = corpus(n_statements)
    build = time.perf_counter() - t0
    assert run_decode_only(data) == n_statements
    f = load(data)
    assert len(f.statements) == n_statements
    allocs = run_resolve(data)
    t_dec = timed(run_decode_only, data, repeat=repeat)
    t_load = timed(run_load, data, repeat=repeat)
    t_res = timed(run_resolve, data, repeat=repeat)
    return {
        "statements": n_statements, "bytes": len(data), "pages": len(data) // m.PAGE_SIZE,
        "allocations": allocs, "epochs": EPOCHS, "build_s": round(build, 2),
        "rates_per_s": {"decode_only": n_statements / t_dec, "load": n_statements / t_load,
                        "resolve": n_statements / t_res},
        "seconds": {"decode_only": t_dec, "load": t_load, "resolve": t_res},
        "ratio_resolve_vs_decode_only": t_dec / t_res,
    }


def report(r: dict) -> str:
    lines = [f"kladde address table: {r['statements']:,} statements, {r['epochs']} epochs, "
             f"{r['pages']:,} pages ({r['bytes']:,} bytes), {r['allocations']:,} allocations"]
    for name, rate in r["rates_per_s"].items():
        lines.append(f"  {name:<12} {rate:>12,.0f} statements/s  ({r['seconds'][name]:.2f} s)")
    lines.append(f"  resolving runs at {r['ratio_resolve_vs_decode_only']:.2f}x the decode-only rate")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(report(bench(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)))
