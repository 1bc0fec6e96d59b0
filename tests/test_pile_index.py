"""``runtime/pile/index.py``: the compact blob index of an open pile behaves as the dict
of lists it replaced (same mapping, same order), at a quarter of its memory."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from bytewright.runtime.pile.index import BlobIndex


def _handles(n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(32) for _ in range(n)]


@pytest.mark.parametrize("n", [0, 1, 700, 5_000])
def test_the_index_is_the_dict_of_lists_it_replaced(n):
    """Occurrences added in a random order with repeats (tables grown several times on
    the way): the same mapping, keys in first-seen order, offsets in added order."""
    rng = random.Random(n)
    handles = _handles(n)
    model: dict[bytes, list[int]] = {}
    index = BlobIndex()
    for off in range(0, 3 * n * 64, 64):
        h = rng.choice(handles) if handles and rng.random() < 0.3 else (
            handles[(off // 64) % n] if n else None)
        if h is None:
            break
        model.setdefault(h, []).append(off)
        index.add(h, off)
    assert len(index) == len(model)
    assert list(index) == list(model)
    assert list(index.items()) == list(model.items())
    assert index == model and dict(index) == model
    for h in list(model)[:50]:
        assert h in index and index[h] == model[h] and index.get(h) == model[h]
        index[h].append(-1)  # a fresh list each time: the index is not changed
        assert index[h] == model[h]
    for absent in (b"\x00" * 32, _handles(1, seed=99)[0], b"short", "not bytes", 5):
        assert absent not in index and index.get(absent) is None
    with pytest.raises(KeyError):
        index[b"\x01" * 32]


def test_a_handle_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="32 bytes"):
        BlobIndex().add(b"\x00" * 31, 0)


def test_a_quarter_of_the_memory_of_a_dict_of_lists():
    """50,000 handles: the dict of lists held ~250 B per handle, the index < 100 B."""
    handles = _handles(50_000)

    def held(build):
        tracemalloc.start()
        try:
            obj = build()
            return tracemalloc.get_traced_memory()[0], obj
        finally:
            tracemalloc.stop()

    def as_dict():
        d: dict[bytes, list[int]] = {}
        for i, h in enumerate(handles):
            d.setdefault(h, []).append(i * 1280)
        return d

    def as_index():
        x = BlobIndex()
        for i, h in enumerate(handles):
            x.add(h, i * 1280)
        return x

    d_bytes, d = held(as_dict)
    x_bytes, x = held(as_index)
    assert x == d
    # the dict's keys are the handles themselves (made before tracing), so its figure
    # is lists, ints and slots only; the index holds its own copy of every handle
    assert x_bytes / len(handles) < 100 and x_bytes * 1.5 < d_bytes, (x_bytes, d_bytes)
