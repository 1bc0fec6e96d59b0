"""kladde statement memory: ``KladdeFile.statements`` is a column table
(StmtTable) and ``by_id`` a sorted index over it (StmtGroups), so ``load`` holds tens of
bytes per statement instead of a tuple with its own int objects. These tests pin the
held bytes (tracemalloc, not wall-clock) and check that both behave exactly as the list
of Stmt tuples and the dict of groups they replace."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from bytewright.bench.kladde import corpus
from bytewright.generated import kladde as g
from bytewright.runtime.kladde import load, model, resolve_statements
from bytewright.runtime.kladde.errors import Corrupt
from bytewright.runtime.kladde.model import PAGE_SIZE
from bytewright.runtime.kladde.reader import apply_cursors
from bytewright.runtime.kladde.writer import encode_table, frame_header, header_fields

from .conftest import spy_releaser


@pytest.fixture(scope="module")
def data() -> bytes:
    return corpus(6_000)  # 8 epochs, every statement form, several table pages


def _expected(f, data: bytes) -> list:
    """The statements as the former list held them: each reachable page's content run
    through the cursor rules, in walk order."""
    out: list = []
    mv = memoryview(data)
    for info in f.pages:
        start = info.content_start
        content, _ = g.decode_table_content(mv[:info.content_end], start)
        apply_cursors(content.statements, info.epoch, info.page, out, {})
    return out


def test_load_holds_few_bytes_per_statement(data):
    gc.collect()
    tracemalloc.start()
    try:
        f = load(data)
        held, _ = tracemalloc.get_traced_memory()
        f.by_id  # noqa: B018 - the grouping resolution builds
        with_groups, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    n = len(f.statements)
    assert n == 6_000
    # 13 bytes of columns + a data slot + Ref ints / Inline bytes ~ 43 B; the list of
    # NamedTuples held ~190 B (181 MB projected for 1M; the target is <= 150 MB)
    assert held / n < 80, held / n
    assert (with_groups - held) / n < 24, (with_groups - held) / n


def test_statement_table_equals_the_tuple_list(data):
    f = load(data)
    want = _expected(f, data)
    got = list(f.statements)
    assert got == want and f.statements == want
    assert all(type(st) is model.Stmt for st in got)
    assert {st.kind for st in got} == {model.REF, model.ZERO, model.SHRINK, model.GROW,
                                       model.TOMBSTONE, model.INLINE}
    for i in (0, 1, 699, 700, 2_999, len(want) - 1, -1, -6_000):
        assert f.statements[i] == want[i]
        assert f.statements[i].page == want[i].page and f.statements[i].index == \
            want[i].index
    assert f.statements[10:20] == want[10:20] and f.statements[::-997] == want[::-997]
    with pytest.raises(IndexError):
        f.statements[6_000]
    with pytest.raises(IndexError):
        f.statements[-6_001]
    inline = next(st for st in got if st.kind == model.INLINE)
    assert isinstance(inline.data, bytes) and f.locate(inline) is not None


def test_root_statements_are_the_root_page_rows():
    head = encode_table([], [model.zero(1, 0, 5), model.inline(2, 0, b"ab")])
    f = load(frame_header(header_fields(journal_pointer=2), 2, head) + bytes(PAGE_SIZE))
    assert [st.describe() for st in f.root_statements] == ["Zero(1, 0, 5)",
                                                            "Inline(2, 0, 6162)"]
    assert f.root_statements == list(f.statements) and type(f.root_statements) is list
    assert (f.statements[1].page, f.statements[1].index, f.statements[1].epoch) == (0, 1, 2)


def test_by_id_equals_the_grouping_dict(data):
    f = load(data)
    groups: dict[int, list] = {}
    for st in _expected(f, data):
        groups.setdefault(st.id, []).append(st)
    by_id = f.by_id
    assert len(by_id) == len(groups)
    assert list(by_id) == list(groups)  # ids in order of first appearance
    assert dict(by_id.items()) == groups
    assert [k for k, _ in by_id.ascending()] == sorted(groups)
    some = sorted(groups)[len(groups) // 2]
    assert by_id[some] == groups[some] and some in by_id
    assert by_id.get(10**9) is None and 10**9 not in by_id and "x" not in by_id
    assert by_id.get(-1) is None and by_id.get(2**40) is None
    with pytest.raises(KeyError):
        by_id[0]


def test_resolution_unchanged(data):
    f = load(data)
    groups: dict[int, list] = {}
    for st in _expected(f, data):
        groups.setdefault(st.id, []).append(st)
    want = {}
    for alloc_id in sorted(groups):
        a = resolve_statements(alloc_id, groups[alloc_id])
        if a is not None:
            want[alloc_id] = a
    got = f.allocations()
    assert got == want and list(got) == list(want)
    assert f.ids() == list(want)
    some = list(want)[len(want) // 3]
    assert f.read(some) == want[some].content(memoryview(data))


@pytest.mark.parametrize("enabled", [True, False])
def test_load_restores_the_collector_state(data, enabled):
    """load pauses the cyclic collector for the walk and restores the caller's state."""
    (gc.enable if enabled else gc.disable)()
    try:
        load(data)
        assert gc.isenabled() is enabled
        with pytest.raises(Corrupt, match="lies outside the file"):  # raised mid-walk
            load(data[:2 * PAGE_SIZE] + b"\x01" * PAGE_SIZE)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_empty_table():
    f = load(frame_header(header_fields(journal_pointer=2), 2, encode_table([], []))
             + bytes(PAGE_SIZE))
    assert len(f.statements) == 0 and f.statements == [] and list(f.statements) == []
    assert len(f.by_id) == 0 and f.by_id.get(1) is None and 1 not in f.by_id
    assert f.allocations() == {} and f.ids() == []


def _file_with_data_pages(tmp_path, n: int = 12, size: int = 40_000):
    import os

    from bytewright.runtime.kladde.writer import Store

    path = tmp_path / "d.kladde"
    s = Store.create(path)
    blobs = {i: os.urandom(size) for i in range(1, n + 1)}
    for i, b in blobs.items():
        s.create_allocation(i)
        s.write(i, 0, b)
        if i % 4 == 0:
            s.flush()
    s.flush()
    s.close()
    return path, blobs


def test_a_mapped_open_reads_the_same_and_resolving_releases_the_data_pages(tmp_path,
                                                                            monkeypatch):
    """``open_file(mapped=True)`` (what ``kladde info/dump/resolve`` use): the same
    allocations and contents as reading the file; resolving checks each data page and
    gives the checked pages back as it goes (a 211 MB file: resolve 300 -> 103 MB,
    info 282 -> 78 MB). Locating a statement, for error messages only, is not done for
    pages that pass (it re-read the statement's page each time: resolve took 18 s on
    that file, now 1.6 s)."""
    import mmap

    from bytewright.runtime.kladde import reader

    path, blobs = _file_with_data_pages(tmp_path)
    plain = reader.open_file(path)
    calls = spy_releaser(monkeypatch, reader)
    monkeypatch.setattr(reader, "RELEASE_EVERY", 4 * PAGE_SIZE)
    located: list = []
    real_locate = reader.KladdeFile.locate
    monkeypatch.setattr(reader.KladdeFile, "locate",
                        lambda self, st: located.append(st) or real_locate(self, st))
    mapped = reader.open_file(path, mapped=True)
    assert isinstance(mapped.data, mmap.mmap) and isinstance(plain.data, bytes)
    assert mapped.allocations() == plain.allocations()
    assert {i: mapped.read(i) for i in blobs} == blobs
    data_pages = sum(mapped._data_ok)
    assert data_pages >= len(blobs) * 9  # 40 kB each: ten 4 KiB data pages or so
    assert len(calls) >= data_pages // 4 - 1 and all(c == len(mapped.data) for c in calls)
    assert located == []  # nothing failed: no statement needed locating


def test_kladde_reading_verbs_print_the_same_from_the_map(tmp_path, capsys, monkeypatch):
    """The CLI's reading verbs map the file, and print what they printed from its bytes."""
    import mmap

    import bytewright.runtime.kladde as kl
    from bytewright.cli.main import main

    path, _ = _file_with_data_pages(tmp_path, n=5, size=9_000)
    real = kl.open_file
    verbs = (("info", []), ("dump", []), ("resolve", []), ("resolve", ["3"]),
             ("resolve", ["--check"]))
    outs, kinds = {}, []
    for force in (False, None):  # read whole, then as the CLI chooses
        def opener(p, *, force=force, **kw):
            if force is not None:
                kw["mapped"] = force
            kf = real(p, **kw)
            kinds.append((force, type(kf.data)))
            return kf
        monkeypatch.setattr(kl, "open_file", opener)
        outs[force] = [(main(["kladde", verb, str(path), *extra]), capsys.readouterr().out)
                       for verb, extra in verbs]
    assert outs[None] == outs[False]
    assert all(code == 0 for code, _ in outs[None]) and "allocation 3" in outs[None][2][1]
    assert {t for f, t in kinds if f is None} == {mmap.mmap}
    assert {t for f, t in kinds if f is False} == {bytes}


def test_resolve_prints_one_allocation_at_a_time_and_nothing_on_a_bad_data_page(
        tmp_path, capsys):
    """``kladde resolve`` (text and --json) prints what the whole list printed, without
    holding it (a 1 GiB file: 216 -> 131 MB, --json 455 -> 130 MB); a data page that
    fails its check still prints nothing on stdout, only the one-line error."""
    import json

    from bytewright.cli.kladde import _print_json_list
    from bytewright.cli.main import main
    from bytewright.runtime.kladde import reader

    for items in ([], [{"a": 1}], [{"id": 1, "f": [{"x": 1}, {"y": [1, 2]}]}, {"id": 2}]):
        _print_json_list(iter(items))
        assert capsys.readouterr().out == json.dumps(items, indent=2) + "\n"
    path, _ = _file_with_data_pages(tmp_path, n=6, size=9_000)
    kf = reader.open_file(path)
    names = {0: "zero", reader.FRAG_INLINE: "inline", reader.FRAG_REF: "ref"}
    want = [{"id": i, "size": a.size, "fragments": [
        {"start": s, "end": e, "from": names[k], **({"address": src} if k == reader.FRAG_REF
                                                     else {})}
        for s, e, k, src in a.fragments]} for i, a in kf.allocations().items()]
    assert main(["kladde", "resolve", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == want
    assert main(["kladde", "resolve", str(path)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(want) == 6
    # damage the last data page a Ref points at: resolving fails before printing
    last = max(src for a in kf.allocations().values() for _, _, k, src in a.fragments
               if k == reader.FRAG_REF)
    data = bytearray(path.read_bytes())
    data[last + 10] ^= 0xFF
    path.write_bytes(bytes(data))
    for extra in ([], ["--json"]):
        assert main(["kladde", "resolve", str(path), *extra]) == 1
        out, err = capsys.readouterr()
        assert out == "" and "fails its check" in err and len(err.splitlines()) == 1, err


def test_resolve_shows_progress_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    import io
    import sys

    from bytewright.cli import common
    from bytewright.cli.main import main

    path, _ = _file_with_data_pages(tmp_path, n=6, size=9_000)
    assert main(["kladde", "resolve", str(path)]) == 0
    assert capsys.readouterr().err == ""  # not a terminal: nothing of the progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    monkeypatch.setattr(common, "PROGRESS_AFTER", 0)
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["kladde", "resolve", str(path)]) == 0
    assert "resolving" in err.getvalue() and "allocations" in err.getvalue()
