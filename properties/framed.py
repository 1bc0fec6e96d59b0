"""Drawing values of framed fields (``framing:``): the logical records as drawn, wrapped
as the decoders give them; for pages with lacing, pages drawn from the fragment record
whose lacing and pieces are then derived from the packets as the encoders derive them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from ..generator import ir
from ..runtime import framing

MAX_PAGE_DRAWS = 8  # redraws of a page whose continued flag says otherwise


def framed_value(builder: Any, draw: Callable, rec: ir.Record, f: ir.Field, items: list,
                 path: str) -> framing.FramedList:
    """``items`` as the framed field's value (blocks need no kept fragments)."""
    fr = f.framing
    if fr.lacing is None:
        return framing.FramedList(items)
    spec = getattr(builder.module, f"_CFR_{rec.name}_{f.name}")
    encode = builder.module.ENCODERS[f.type.target]
    segs: list[int] = []
    for raw in (encode(x) for x in items):
        segs += [framing.CONTINUES] * (len(raw) // framing.CONTINUES) \
            + [len(raw) % framing.CONTINUES]
    cuts = sorted(draw(st.sets(st.integers(1, len(segs) - 1), max_size=3))) \
        if len(segs) > 1 else []
    bounds = [0, *cuts, len(segs)] if segs else []
    frag = builder.family.records[fr.fragment]
    kept, open_ = [], False
    for k in range(len(bounds) - 1):
        n = bounds[k + 1] - bounds[k]
        if n > 255:  # more lacing values than a u8 count holds
            builder.reject(f"{rec.name}.{f.name}: a page of {n} lacing values")
        for _ in range(MAX_PAGE_DRAWS):
            page, _scope = builder.draw_record(draw, frag, {}, f"{path}.fragments[{k}]", [])
            page = dataclasses.replace(page, **{fr.lacing: [0] * n})
            if spec.continued_at or bool(spec.continued(page)) == open_:
                break  # a stored flag is set by the encoder, a computed one must hold
        else:
            builder.reject(f"{rec.name}.{f.name}: no page drawn with continued={open_}")
        kept.append(page)
        open_ = segs[bounds[k + 1] - 1] == framing.CONTINUES
    return framing.FramedList(items, framing.pages(spec, [encode(x) for x in items], kept))
