"""Shared test helpers."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_cases(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "cases" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def budget(full: int, fast: int) -> list:
    """Parameters for a sized run (hypothesis examples, sweep cases): ``fast`` in the
    default run and ``full`` under ``-m long``, so the default run keeps a quick test of
    the same behaviour and the long run keeps the whole budget."""
    return [pytest.param(fast, id=f"n{fast}"),
            pytest.param(full, id=f"long{full}", marks=pytest.mark.long)]


def spread(cases: list, fast: int) -> list:
    """``cases`` as parameters: ``fast`` of them, spread over the whole list, in the
    default run, and every one of the others under ``-m long`` (nothing is dropped).
    A tuple case is the values of several argument names."""
    if len(cases) <= fast:
        return list(cases)
    step = len(cases) / fast
    keep = {int((i + 0.5) * step) for i in range(fast)}  # the middle of each stretch
    return [case if i in keep else _long_param(case) for i, case in enumerate(cases)]


def _long_param(case):
    if isinstance(case, type(pytest.param(None))):
        return pytest.param(*case.values, id=case.id, marks=[*case.marks, pytest.mark.long])
    values = case if isinstance(case, tuple) else (case,)
    return pytest.param(*values, marks=pytest.mark.long)


@pytest.fixture(scope="session")
def shipped_schemas():
    """The shipped schemas as a diff side (every pass, emitters included), loaded once per
    process for the doc tests that only read it."""
    from bytewright.review import diff

    return diff.shipped("schemas")


@pytest.fixture(scope="session")
def htt_cases():
    return load_cases("htt_cases").cases()


def build_module(yaml_text: str, tmp_path: Path, name: str = "t"):
    """Generate a module from schema text (not shipped) and import it."""
    import importlib.util as iu

    from bytewright.generator import pipeline

    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml_text)
    result = pipeline.run([path])
    assert not result.problems, [str(p) for p in result.problems]
    (text,) = result.modules.values()
    out = tmp_path / f"gen_{name}.py"
    out.write_text(text)
    spec = iu.spec_from_file_location(f"gen_{name}", out)
    mod = iu.module_from_spec(spec)
    import sys
    sys.modules[spec.name] = mod  # dataclasses look their module up while being built
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def schema_module(tmp_path):
    return lambda text, name="t": build_module(text, tmp_path, name)


# Whole-file helpers the store tests share (kept here, not in each test module).
def read(path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def write(path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


def htt_wal_with_an_unappliable_entry(path: str, n: int, bad: int) -> tuple[bytes, list]:
    """An HTT store of ``n`` quantized INSERTs whose entry ``bad`` holds a TQ1.9 value
    outside +-29524 under a valid CRC (it decodes, and applying it raises), written to
    ``path``; returns the file's bytes and the entries as first written."""
    from bytewright.generated import htt as g
    from bytewright.runtime.htt import replay
    from bytewright.runtime.htt.quantized import TailCodec
    from bytewright.runtime.htt.state import State
    from bytewright.runtime.htt.store import Store

    with Store.create(path, semantic_dims=20, quantized=True) as s:
        for i in range(n):
            s.put(f"/n{i:03d}", b"v" * 30, semantic=[0.0] * 16 + [0.5, 0.0, 0.0, 0.0])
    data = read(path)
    layout = {"semantic_dims": 20, "tail_layout": g.SemTailLayout.quantized}
    prefix = replay.read_prefix(data)
    pos = replay.load_snapshot(data, prefix, State(TailCodec(20, layout["tail_layout"]))) \
        + replay.WAL_HEADER_SIZE
    entries = [e for e, _ in g.iter_wal_entry(data, pos, **layout)]
    e = entries[bad]
    entries[bad] = g.WalEntry(e.seq, e.op, e.key, g.InsertBody(
        e.body.data, e.body.meta, g.TailQuantized([30000, 0, 0, 0])))
    out = data[:pos] + b"".join(g.encode_wal_entry(x, **layout) for x in entries)
    write(path, out)
    return out, entries


def spy_releaser(monkeypatch, module, name: str = "releaser", record=None,
                 calls: list | None = None) -> list:
    """Replace ``module.<name>`` (a ``releaser(mm)`` factory, runtime/mapped.py) with one
    whose ``release(upto)`` still releases and also records ``record(upto)`` (default:
    ``upto``) in ``calls`` (a new list unless given), returned: what the page-release
    tests check."""
    calls = [] if calls is None else calls
    real = getattr(module, name)

    def spy(mm):
        rel = real(mm)

        def release(upto):
            calls.append(upto if record is None else record(upto))
            rel(upto)
        return release

    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.fixture(autouse=True)
def _background_compactions_finish():
    """An HTT store may compact on a background thread after a write; it finishes within
    the test that started it, so no later test (a tracemalloc peak counts every thread's
    allocations) measures another test's work."""
    yield
    for t in threading.enumerate():
        if t.name.startswith("htt-compact"):
            t.join(timeout=60)
