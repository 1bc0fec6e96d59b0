"""Model-based test: random allocation edits over many epochs, flushed through the writer
to a real file, resolved by the reader from the bytes on disk, equal an in-memory model."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bytewright.runtime.kladde import Store, check_no_conflicts, open_file
from bytewright.runtime.kladde import journal as jn
from bytewright.runtime.kladde.writer import OsIO

IDS = st.integers(1, 6)
BYTE = st.sampled_from([0, 0, 0, 1, 7, 0x80, 0xFF])


@st.composite
def payloads(draw):
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(min_size=1, max_size=64))
    if kind == 1:  # runs of one byte (long zero runs become Zero statements)
        return bytes([draw(BYTE)]) * draw(st.integers(1, 600))
    if kind == 2:
        return bytes(draw(st.lists(BYTE, min_size=1, max_size=300)))
    return draw(st.binary(min_size=4000, max_size=9000))  # spans data pages


OPS = st.one_of(
    st.tuples(st.just("write"), IDS, st.integers(0, 5000), payloads()),
    st.tuples(st.just("zero"), IDS, st.integers(0, 5000), st.integers(1, 3000)),
    st.tuples(st.just("resize"), IDS, st.integers(0, 6000)),
    st.tuples(st.just("delete"), IDS),
    st.tuples(st.just("create"), IDS),
    st.just(("flush",)),
    st.just(("flush",)),
    st.just(("reopen",)),
    st.just(("commit",)),
    st.just(("commit",)),
    st.tuples(st.just("splice"), IDS, st.integers(0, 300), st.integers(0, 200),
              st.binary(max_size=300)),
    st.tuples(st.just("copy"), IDS, st.integers(0, 400), st.integers(0, 5000), IDS,
              st.integers(0, 400)),
    st.tuples(st.just("move"), IDS, st.integers(0, 400), st.integers(0, 5000), IDS,
              st.integers(0, 400)),
    st.just(("reopen_journal",)),
    st.tuples(st.just("crash"), st.sampled_from(["flush", "commit"]), st.integers(0, 12),
              st.booleans()),
)


class Crash(Exception):
    pass


class CrashIO(OsIO):
    """Crashes at write step ``at`` (``torn``: half of that write lands first)."""

    def __init__(self, at: int, torn: bool) -> None:
        self.at, self.torn, self.steps = at, torn, 0

    def _hit(self) -> bool:
        self.steps += 1
        return self.steps - 1 == self.at

    def pwrite(self, fd, data, offset):
        if self._hit():
            if self.torn:
                super().pwrite(fd, data[:max(1, len(data) // 2)], offset)
            raise Crash
        super().pwrite(fd, data, offset)

    def ftruncate(self, fd, size):
        if self._hit():
            raise Crash
        super().ftruncate(fd, size)

    def fsync(self, fd):
        if self._hit():
            raise Crash
        super().fsync(fd)

_names = itertools.count()


def apply(model: dict[int, bytearray], store: Store, op) -> None:
    name = op[0]
    if name == "write":
        _, i, off, data = op
        buf = model.setdefault(i, bytearray())
        if off + len(data) > len(buf):
            buf.extend(bytes(off + len(data) - len(buf)))
        buf[off:off + len(data)] = data
        store.write(i, off, data)
    elif name == "zero":
        _, i, off, n = op
        buf = model.setdefault(i, bytearray())
        if off + n > len(buf):
            buf.extend(bytes(off + n - len(buf)))
        buf[off:off + n] = bytes(n)
        store.zero(i, off, n)
    elif name == "resize":
        _, i, n = op
        buf = model.setdefault(i, bytearray())
        if n < len(buf):
            del buf[n:]
        else:
            buf.extend(bytes(n - len(buf)))
        store.resize(i, n)
    elif name == "splice":  # the reference implementation's naive oracle (state.rs)
        _, i, off, old_len, data = op
        buf = model.setdefault(i, bytearray())
        end = off + old_len
        if len(buf) < end:
            buf.extend(bytes(end - len(buf)))
        buf[off:end] = data
        store.splice(i, off, old_len, data)
    elif name in ("copy", "move"):
        _, src, so, n, dst, do = op
        have = model.get(src)
        piece = bytes((have[so + k] if have is not None and so + k < len(have) else 0)
                      for k in range(n))
        buf = model.setdefault(dst, bytearray())
        if len(buf) < do + n:
            buf.extend(bytes(do + n - len(buf)))
        buf[do:do + n] = piece
        if name == "move" and src in model:
            sv = model[src]
            for k in range(so, so + n):
                if k < len(sv) and not (src == dst and do <= k < do + n):
                    sv[k] = 0
        (store.move if name == "move" else store.copy)(src, so, n, dst, do)
    elif name == "delete":
        if op[1] in model:
            del model[op[1]]
            store.delete(op[1])
    elif name == "create":
        if op[1] not in model:
            model[op[1]] = bytearray()
            store.create_allocation(op[1])


def assert_disk_equals(path, model) -> None:
    f = open_file(path)
    check_no_conflicts(f)
    assert f.ids() == sorted(model)
    assert f.contents() == {i: bytes(b) for i, b in model.items()}


def run_sequence(tmp_path, ops) -> None:
    path = tmp_path / f"model{next(_names)}.kladde"
    model: dict[int, bytearray] = {}
    durable: dict[int, bytes] = {}  # the state a crash now would leave (last commit/flush)
    store = Store.create(path)

    def snap(m) -> dict[int, bytes]:
        return {i: bytes(b) for i, b in m.items()}

    try:
        for op in ops:
            if op[0] == "flush":
                epoch = store.flush()
                f = open_file(path)
                assert (f.epoch, f.slot) == (epoch, epoch % 2)
                assert_disk_equals(path, model)
                durable = snap(model)
            elif op[0] == "reopen":
                store.flush()
                store.close()
                store = Store.open(path)
                durable = snap(model)
            elif op[0] == "commit":
                store.commit()
                durable = snap(model)
                assert jn.current_state(open_file(path)).contents() == durable
            elif op[0] == "reopen_journal":  # the journal replays and folds at open
                store.commit()
                store.close()
                store = Store.open(path)
                durable = snap(model)
                assert open_file(path).contents() == durable
            elif op[0] == "crash":  # a crash at one write step of a flush or a commit
                _, what, at, torn = op
                store.io = CrashIO(at, torn)
                crashed = False
                try:
                    store.flush() if what == "flush" else store.commit()
                except Crash:
                    crashed = True
                store.close()
                got = jn.current_state(open_file(path)).contents()
                if crashed:
                    assert got in (durable, snap(model))
                else:
                    assert got == snap(model)
                model = {i: bytearray(b) for i, b in got.items()}
                durable = dict(got)
                store = Store.open(path)
                assert {i: store.read(i) for i in store.ids()} == got
            else:
                apply(model, store, op)
            # the store's current view (edits included) matches the model too
            assert store.ids() == sorted(model)
        store.flush()
        assert_disk_equals(path, model)
    finally:
        store.close()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=40))
@example([("write", 1, 0, b"abcdef" * 50), ("flush",), ("resize", 1, 10), ("flush",),
          ("resize", 1, 300), ("flush",)])  # shrink-then-grow: the regrown tail reads zero
@example([("write", 1, 0, b"x" * 100), ("flush",), ("resize", 1, 10), ("resize", 1, 300),
          ("write", 1, 200, b"y"), ("flush",)])  # the same within one epoch
@example([("write", 2, 0, b"old" * 40), ("flush",), ("delete", 2), ("flush",),
          ("write", 2, 50, b"new"), ("flush",)])  # tombstone-then-recreate: no old bytes
@example([("write", 2, 0, b"old" * 40), ("flush",), ("delete", 2), ("create", 2),
          ("write", 2, 200, b"n"), ("flush",)])  # delete and re-create in one epoch
@example([("write", 3, 0, bytes(5000) + b"z"), ("flush",), ("zero", 3, 4990, 11),
          ("flush",), ("create", 4), ("flush",), ("reopen",), ("resize", 4, 7000)])
@example([("write", 1, 0, b"a" * 100), ("commit",), ("write", 2, 0, b"b" * 5000),
          ("crash", "commit", 2, True), ("write", 1, 50, b"c"), ("crash", "flush", 3, True),
          ("write", 3, 9, b"d" * 40), ("commit",), ("reopen_journal",),
          ("crash", "flush", 0, False)])  # torn journal record, torn page, fold at open
@example([("write", 1, 0, b"abcdefgh" * 10), ("commit",), ("splice", 1, 3, 10, b"XY"),
          ("move", 1, 0, 30, 1, 10), ("copy", 1, 5, 40, 2, 7), ("commit",),
          ("reopen_journal",), ("move", 2, 100, 5, 3, 0), ("flush",)])
def test_random_edits_match_model(tmp_path, ops):
    run_sequence(tmp_path, ops)


def test_long_history(tmp_path):
    """Many epochs of overlapping edits on few ids (a deterministic long run)."""
    import random

    rnd = random.Random(5)
    ops = []
    for _ in range(400):
        r = rnd.random()
        i = rnd.randint(1, 4)
        if r < 0.35:
            ops.append(("write", i, rnd.randint(0, 2000),
                        bytes(rnd.choice([0, 1, 2, 3]) for _ in range(rnd.randint(1, 700)))))
        elif r < 0.5:
            ops.append(("zero", i, rnd.randint(0, 2000), rnd.randint(1, 500)))
        elif r < 0.65:
            ops.append(("resize", i, rnd.randint(0, 2500)))
        elif r < 0.72:
            ops.append(("delete", i))
        elif r < 0.78:
            ops.append(("create", i))
        else:
            ops.append(("flush",))
    run_sequence(tmp_path, ops)


def _sample_file(tmp_path) -> bytes:
    path = tmp_path / "fuzz-base.kladde"
    if not path.exists():
        with Store.create(path) as s:
            s.write(1, 0, b"abc" * 50)
            s.write(2, 10, bytes(100) + b"x" * 200)
            s.flush()
            s.resize(1, 20)
            s.delete(2)
            s.write(3, 5, b"q")
            s.flush()
            s.resize(1, 90)
            s.create_allocation(2)
            s.flush()
    return path.read_bytes()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_pages_fail_cleanly(tmp_path, data):
    """Arbitrary content in reachable pages (re-framed with a valid CRC) or raw byte flips:
    the reader resolves or raises the project's error, never anything else."""
    from bytewright.generated import kladde as g
    from bytewright.runtime.errors import BytewrightError

    buf = bytearray(_sample_file(tmp_path))
    npages = len(buf) // 4096
    p = data.draw(st.integers(2, npages - 1))
    raw, _ = g.decode_page(buf, p * 4096)
    content = bytearray(raw.content)
    if data.draw(st.booleans()) and content:
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(content) - 1))
            content[i] = data.draw(st.integers(0, 255))
    else:
        content = bytearray(data.draw(st.binary(max_size=64)))
    kind = data.draw(st.sampled_from([raw.kind, 1, 2, 3]))
    epoch = data.draw(st.sampled_from([raw.epoch, 0, 3, 4]))
    buf[p * 4096:(p + 1) * 4096] = g.encode_page(g.Page(kind, epoch, bytes(content)))
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] ^= 1 << data.draw(st.integers(0, 7))
    try:
        f = open_file_bytes(bytes(buf))
        f.allocations()
    except BytewrightError:
        pass


def open_file_bytes(buf: bytes):
    from bytewright.runtime.kladde import load

    return load(buf)
