"""kladde: codecs, reference vectors, header-slot choice, every rejection, writer rules."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bytewright.generated import kladde as k
from bytewright.review.checks import check_fixture, fixtures
from bytewright.runtime import checksums
from bytewright.runtime.errors import BytewrightError, DecodeError, EncodeError
from bytewright.runtime.kladde import (
    Corrupt,
    DanglingPointer,
    NotKladde,
    Store,
    UnsupportedVersion,
    check_no_conflicts,
    conflicts,
    empty_file,
    load,
    open_file,
    pack_tables,
    resolve_statements,
    statements_of,
)
from bytewright.runtime.kladde import model as m
from bytewright.runtime.kladde.writer import frame_header, header_fields
from bytewright.runtime.varint import decode_uleb128, encode_uleb128

HERE = Path(__file__).resolve().parent
P = m.PAGE_SIZE


def _cases():
    spec = importlib.util.spec_from_file_location("kladde_cases", HERE / "cases" / "kladde_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


C = _cases()


# -- reference vectors (facts.md §1.4, §3) -------------------------------------------------

VARINTS = [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"),
           (16384, "808001"), (2**32 - 1, "ffffffff0f"), (2**49 - 1, "ffffffffffff7f"),
           (2**64 - 1, "ff" * 9 + "01")]


@pytest.mark.parametrize("value,hexed", VARINTS)
def test_varint_reference_vectors(value, hexed):
    assert encode_uleb128(value).hex() == hexed
    assert decode_uleb128(bytes.fromhex(hexed)) == (value, len(hexed) // 2)
    # and through the generated codec (a Grow's n delta is a varint)
    st = k.Statement(1, k.StatementTag.Grow, k.GrowBody(value))
    data = k.encode_statement(st)
    assert data == b"\x01\x03" + bytes.fromhex(hexed)
    assert k.decode_statement(data) == (st, len(data))


def test_varint_decoder_limits():
    with pytest.raises(DecodeError):
        decode_uleb128(b"\xff" * 10 + b"\x01")  # an 11th group
    with pytest.raises(DecodeError):
        decode_uleb128(b"\xff" * 9 + b"\x02")  # the 10th group carries more than one bit
    with pytest.raises(DecodeError):
        decode_uleb128(b"\x80\x80")  # truncated
    assert decode_uleb128(b"\x80\x00") == (0, 2)  # overlong accepted by the table reader
    # so an overlong zero also ends the child list
    content, _ = k.decode_table_content(bytes.fromhex("028000010300"))
    assert content.children == [2] and len(content.statements) == 1


def test_crc32c_check_value():
    assert checksums.crc32c(b"123456789") == 0xE3069283


# -- fixtures and facts.md examples --------------------------------------------------------

def test_fixtures_pass_both_codec_paths():
    fxs = fixtures("kladde")
    assert len(fxs) >= 14
    for fx in fxs:
        res = check_fixture(fx)
        assert res.ok, (fx.path.name, res.error, res.checks)


def test_fixtures_reproducible_from_cases():
    stored = {fx.path.stem: fx for fx in fixtures("kladde")}
    for name, record, params, value, _doc in C.cases():
        assert k.ENCODERS[record](value, **params) == stored[name].data, name


@pytest.mark.parametrize("name,head", [("example_a_empty_header", C.EXAMPLE_A_HEAD),
                                       ("example_b_table_page", C.EXAMPLE_B_HEAD),
                                       ("example_c_slot1_header", C.EXAMPLE_C_HEAD)])
def test_facts_examples_bytes(name, head):
    value = next(v for n, _, _, v, _ in C.cases() if n == name)
    data = k.ENCODERS[next(r for n, r, _, _, _ in C.cases() if n == name)](value)
    want = bytes.fromhex(head.replace(" ", ""))
    assert data[:len(want)] == want
    assert data[len(want):] == bytes(P - len(want))


def test_empty_file_as_reference_creates_it(tmp_path):
    data = empty_file()
    assert len(data) == 2 * P
    assert data[:64] == bytes.fromhex(C.EXAMPLE_A_HEAD.replace(" ", ""))
    assert data[64:] == bytes(2 * P - 64)
    s = Store.create(tmp_path / "new.kladde")
    s.close()
    assert (tmp_path / "new.kladde").read_bytes() == data
    f = load(data)
    assert (f.slot, f.epoch, f.ids(), f.header.journal_pointer) == (0, 0, [], 2)


def test_example_b_resolution():
    sts = statements_of(C.example_b_content(), epoch=4)
    by = {}
    for st in sts:
        by.setdefault(st.id, []).append(st)
    a3 = resolve_statements(3, by[3])
    assert a3.size == 120
    assert a3.fragments == [(0, 100, 2, 20491), (100, 120, 0, None)]
    assert resolve_statements(7, by[7]) is None
    a9 = resolve_statements(9, by[9])
    assert a9.size == 50 and a9.content(b"") == b"\x01\x02\x03" + bytes(47)
    a1000 = resolve_statements(1000, by[1000])
    assert a1000.size == 8 and a1000.fragments == [(0, 7, 0, None), (7, 8, 2, 11)]


def test_example_c_resolution():
    data = bytes.fromhex(C.EXAMPLE_C_HEAD.replace(" ", ""))
    page1 = data + bytes(P - len(data))
    f = load(empty_file()[:P] + page1)
    assert (f.slot, f.epoch) == (1, 1)
    assert f.ids() == [1] and f.read(1) == b""


# -- header-slot choice (facts.md §2.2) ------------------------------------------------------

def _header(epoch, content=None, **fields):
    content = content or k.TableContent([], [])
    return frame_header(header_fields(**fields), epoch, content)


def _recrc_header(page: bytearray) -> bytearray:
    n = int.from_bytes(page[57:59], "little")
    crc = checksums.crc32c(bytes(page[:57]) + bytes(page[59:59 + n]))
    page[59 + n:63 + n] = crc.to_bytes(4, "little")
    return page


def test_slot1_wins_over_slot0():
    grow = k.TableContent([], [k.Statement(5, k.StatementTag.Grow, k.GrowBody(3))])
    f = load(_header(2) + _header(3, grow))
    assert (f.slot, f.epoch, f.ids()) == (1, 3, [5])
    f = load(_header(4) + _header(3, grow))
    assert (f.slot, f.epoch, f.ids()) == (0, 4, [])


def test_torn_newer_header_falls_back_to_older_slot():
    grow = k.TableContent([], [k.Statement(5, k.StatementTag.Grow, k.GrowBody(3))])
    newer = bytearray(_header(4))
    newer[100:200] = b"\xaa" * 100  # padding is not checksummed: still valid
    assert load(bytes(newer) + _header(3, grow)).slot == 0
    newer[16] = 7  # torn: part of the new header written, CRC no longer matches
    f = load(bytes(newer) + _header(3, grow))
    assert (f.slot, f.epoch, f.ids()) == (1, 3, [5])


def test_header_parity_and_kind_are_checked():
    # an odd epoch in slot 0 is skipped; slot 1 with the right parity wins
    f = load(_header(5) + _header(3))
    assert (f.slot, f.epoch) == (1, 3)
    bad_kind = bytearray(_header(2))
    bad_kind[48] = 2
    with pytest.raises(Corrupt, match="neither header slot is valid"):
        load(bytes(_recrc_header(bad_kind)) + bytes(P))


def test_not_kladde_and_corrupt():
    with pytest.raises(NotKladde):
        load(b"\x8bKLADDE" + bytes(100))
    with pytest.raises(NotKladde):
        load(bytes(2 * P))
    torn = bytearray(empty_file())
    torn[70] ^= 1  # past the content: not covered, still valid
    assert load(bytes(torn)).slot == 0
    torn[58] ^= 1  # the content byte
    with pytest.raises(Corrupt, match="neither header slot is valid") as exc:
        load(bytes(torn))
    assert isinstance(exc.value, BytewrightError) and exc.value.offset == 0


def test_page_size_13_is_corrupt_not_unsupported():
    page = bytearray(_header(0))
    page[11] = 13
    with pytest.raises(Corrupt, match="neither header slot"):
        load(bytes(_recrc_header(page)) + bytes(P))


def test_min_reader_version_refused():
    with pytest.raises(UnsupportedVersion) as exc:
        load(_header(0, min_reader_version=1) + bytes(P))
    assert exc.value.min_reader_version == 1
    assert exc.value.page == 0 and exc.value.offset == 14
    # format_version is informational
    assert load(_header(0, format_version=9) + bytes(P)).epoch == 0


# -- rejections: the project's error, with page number and offset ---------------------------

def _deltas(children):
    return [b - a for a, b in zip([0] + children, children, strict=False)]


def _table(children, statements=(), epoch=1):
    return k.encode_table_page(k.TablePage(k.PageKind.AddressTable, epoch,
                                           k.TableContent(_deltas(children), list(statements))))


def _raw(content: bytes, epoch=1, kind=1):
    return k.encode_page(k.Page(kind, epoch, content))


def _file(root_children, pages, epoch=2, root_statements=()):
    head = _header(epoch, k.TableContent(_deltas(root_children), list(root_statements)))
    slots = head + bytes(P) if epoch % 2 == 0 else bytes(P) + head
    return slots + b"".join(pages)


def _corrupt(data, page, offset, match):
    with pytest.raises(Corrupt, match=match) as exc:
        f = load(data)
        f.allocations()
    err = exc.value
    assert isinstance(err, DecodeError)
    assert err.page == page and err.offset == offset, (err.page, err.offset, str(err))
    assert f"page {page}" in str(err)
    return err


def test_reject_cycle():
    # header -> 2 -> 3 -> 2
    data = _file([2], [_table([3]), _table([2])])
    _corrupt(data, 2, 3 * P + 11, "do not form a tree")


def test_reject_dag_revisit():
    # header -> 2, 3; both name 4
    data = _file([2, 3], [_table([4]), _table([4]), _table([])])
    _corrupt(data, 4, 3 * P + 11, "named twice")


def test_reject_child_ref_below_2():
    data = _file([1], [])
    _corrupt(data, 0, 59, "child reference out of range")
    # a child page whose first child delta is 1 names page 1 (a header slot)
    data = _file([2], [_raw(b"\x01\x00")])
    _corrupt(data, 2, 2 * P + 11, "child reference out of range")


def test_reject_child_outside_file():
    _corrupt(_file([9], []), 9, 59, "outside the file")


def test_reject_id_zero():
    data = _file([2], [_raw(b"\x00" + b"\x00\x03\x00")])
    _corrupt(data, 2, 2 * P + 12, "statement id out of range")


def test_reject_id_above_32_bits():
    st = k.Statement(2**32, k.StatementTag.Tombstone, None)
    _corrupt(_file([2], [_table([], [st])]), 2, 2 * P + 12, "statement id out of range")


def test_reject_offset_overflow():
    sts = [k.Statement(1, k.StatementTag.Grow, k.GrowBody(10)),
           k.Statement(0, k.StatementTag.Zero, k.ZeroBody(2**32 - 12, 5))]
    # statement 1 starts after the delimiter (1 byte) and statement 0 (3 bytes)
    _corrupt(_file([2], [_table([], sts)]), 2, 2 * P + 11 + 1 + 3, "offset out of range")
    st = k.Statement(1, k.StatementTag.Shrink, k.ShrinkBody(2**32))
    _corrupt(_file([2], [_table([], [st])]), 2, 2 * P + 12, "offset out of range")


def test_reject_ref_spanning_a_page_boundary():
    st = k.Statement(1, k.StatementTag.Ref, k.RefBody(0, 200, 3 * P + 4000))
    data = _file([], [_raw(bytes(100), kind=2)], root_statements=[st])
    _corrupt(data, 0, 60, "spans a page boundary")


def test_reject_inline_past_content():
    content = b"\x00" + b"\x01\x0a\x00\x01\x02"  # size_tag 10 = 6 bytes, only 2 present
    _corrupt(_file([2], [_raw(content)]), 2, 2 * P + 11 + 4, "inline payload runs past")


def test_reject_truncated_varint():
    _corrupt(_file([2], [_raw(b"\x00\x01\x00\x80")]), 2, 2 * P + 11 + 3, "truncated varint")
    _corrupt(_file([2], [_raw(b"\x02\x80")]), 2, 2 * P + 12, "truncated varint")
    # content ending inside the child list (no delimiter)
    _corrupt(_file([2], [_raw(b"")]), 2, 2 * P + 11, "truncated varint")


def test_reject_statement_without_tag():
    _corrupt(_file([2], [_raw(b"\x00\x01")]), 2, 2 * P + 13, "statement without a tag")


def test_reject_bad_crc_on_reachable_page():
    page = bytearray(_table([], [k.Statement(1, k.StatementTag.Grow, k.GrowBody(1))]))
    page[11 + 4] ^= 0xFF  # corrupt the stored CRC
    _corrupt(_file([2], [bytes(page)]), 2, 2 * P + 15, "fails its check")
    page = bytearray(_table([]))
    page[9:11] = b"\xff\xff"  # content_size past the page
    _corrupt(_file([2], [bytes(page)]), 2, 2 * P + 9, "fails its check")


def test_reject_epoch_newer_than_header():
    _corrupt(_file([2], [_table([], epoch=3)], epoch=2), 2, 2 * P + 1, "newer than its header")


def test_reject_not_an_address_table_page():
    _corrupt(_file([2], [_raw(b"\x00", kind=2)]), 2, 2 * P, "not an address-table page")


def test_reject_winning_ref_checks():
    def ref(addr, size=4):
        return k.Statement(1, k.StatementTag.Ref, k.RefBody(0, size, addr))
    _corrupt(_file([], [], root_statements=[ref(11)]), 0, 60, "points outside the file")
    _corrupt(_file([], [], root_statements=[ref(5 * P + 11)]), 5, 60, "points outside the file")
    _corrupt(_file([2], [_table([])], root_statements=[ref(2 * P + 11)]), 2, 2 * P,
             "not a data page")
    bad = bytearray(_raw(b"abcd", kind=2))
    bad[12] ^= 1  # a content byte
    _corrupt(_file([], [bytes(bad)], root_statements=[ref(2 * P + 11)]), 2, 2 * P + 15,
             "data page 2 fails its check")
    _corrupt(_file([], [_raw(b"abcd", kind=2, epoch=9)], root_statements=[ref(2 * P + 11)]),
             2, 2 * P + 1, "newer than its header")
    # a fully shadowed Ref is never checked
    newer = k.Statement(1, k.StatementTag.Zero, k.ZeroBody(0, 4))
    old = _table([], [ref(11)], epoch=1)
    ok = _file([2, 3], [old, _table([], [newer], epoch=2)], epoch=2)
    assert load(ok).read(1) == bytes(4)


def test_resolution_across_epochs():
    def T(epoch, *sts):
        return _table([], sts, epoch=epoch)
    S = k.Statement
    Tag = k.StatementTag
    data_page = _raw(b"0123456789abcdef", kind=2, epoch=1)
    e1 = T(1, S(1, Tag.Ref, k.RefBody(0, 16, 2 * P + 11)), S(1, Tag.Ref, k.RefBody(0, 4, 2 * P + 11)))
    e2 = T(2, S(1, Tag.Shrink, k.ShrinkBody(6)), S(1, Tag.Tombstone, None))
    e3 = T(3, S(1, Tag.Grow, k.GrowBody(10)), S(1, 5, k.InlineBody(0, b"A")))
    f = load(_file([3, 4, 5], [data_page, e1, e2, e3], epoch=3))
    # id 1: Shrink@2 anchors at 6, Grow@3 -> 10; bytes >= 6 read zero (regrown tail)
    assert f.read(1) == b"012345" + bytes(4)
    # id 2: Ref@1, Tombstone@2, recreated by Inline@3: uncovered bytes read zero
    assert f.read(2) == b"A"
    assert f.ids() == [1, 2]
    with pytest.raises(DanglingPointer):
        f.read(3)


# -- validator ----------------------------------------------------------------------------

def test_no_conflict_validator():
    S = m.Stmt
    good = [S(1, m.REF, 0, 4, 2 * P + 11, 1), S(1, m.ZERO, 4, 4, None, 1),
            S(1, m.SHRINK, 8, 0, None, 1), S(2, m.TOMBSTONE, 0, 0, None, 1),
            S(2, m.GROW, 5, 0, None, 2)]
    assert conflicts(good) == []
    cases = [
        ([S(1, m.TOMBSTONE, 0), S(1, m.GROW, 0)], "contradict"),
        ([S(1, m.ZERO, 0, 4), S(1, m.INLINE, 3, 1, b"x")], "named twice"),
        ([S(1, m.SHRINK, 4), S(1, m.SHRINK, 5)], "more than one Shrink"),
        ([S(1, m.GROW, 4), S(1, m.GROW, 5)], "more than one Grow"),
        ([S(1, m.SHRINK, 4), S(1, m.GROW, 5)], "both a Shrink and a Grow"),
        ([S(1, m.ZERO, 0, 5), S(1, m.SHRINK, 4)], "reaches past the same-epoch Shrink"),
        ([S(1, m.ZERO, 0, 0)], "zero-length"),
    ]
    for sts, msg in cases:
        found = conflicts(sts)
        assert found and any(msg in c.message for c in found), (sts, found)
    # on a file: the project's error with the page and the statement's offset
    sts = [k.Statement(1, k.StatementTag.Grow, k.GrowBody(4)),
           k.Statement(0, k.StatementTag.Grow, k.GrowBody(1))]
    f = load(_file([2], [_table([], sts)]))
    with pytest.raises(Corrupt, match="more than one Grow") as exc:
        check_no_conflicts(f)
    assert exc.value.page == 2 and exc.value.offset == 2 * P + 11 + 1 + 3


# -- writer rules ------------------------------------------------------------------------

def test_writer_rules():
    S = m.Stmt
    with pytest.raises(EncodeError, match="Grow"):
        pack_tables([S(1, m.GROW, 5), S(1, m.ZERO, 5, 10)])
    with pytest.raises(EncodeError, match="sorted"):
        pack_tables([S(2, m.GROW, 0), S(1, m.GROW, 0)])
    with pytest.raises(EncodeError, match="backwards"):
        pack_tables([S(1, m.ZERO, 0, 10), S(1, m.ZERO, 5, 10)])
    with pytest.raises(EncodeError, match="Inline"):
        pack_tables([S(1, m.INLINE, 0, 252, bytes(252))])
    with pytest.raises(EncodeError):
        pack_tables([S(0, m.GROW, 0)])
    # minimal varints, sorted, several pages with fresh cursors
    many = [S(i, m.INLINE, 0, 40, bytes([i % 251 + 1]) * 40) for i in range(1, 400)]
    pages = pack_tables(many)
    assert len(pages) > 1
    for content in pages:
        assert len(k.encode_table_content(content)) <= m.MAX_PAGE_CONTENT
    back = [st for content in pages for st in statements_of(content)]
    assert [(s.id, s.offset, s.data) for s in back] == [(s.id, s.offset, s.data) for s in many]


def test_flush_writes_header_slot_epoch_mod_2(tmp_path):
    path = tmp_path / "f.kladde"
    with Store.create(path) as s:
        for epoch in range(1, 6):
            s.write(epoch, 0, bytes([epoch]) * 5000)
            assert s.flush() == epoch
            f = open_file(path)
            assert (f.epoch, f.slot) == (epoch, epoch % 2)
            assert f.header.journal_pointer == f.npages
        check_no_conflicts(open_file(path))
        assert open_file(path).read(3) == b"\x03" * 5000
        s.set_header(root_allocation=3)
        s.flush()
    f = open_file(path)
    assert f.header.root_allocation == 3 and f.ids() == [1, 2, 3, 4, 5]


def test_flush_carries_foreign_root_statements(tmp_path):
    path = tmp_path / "c.kladde"
    data = bytes.fromhex(C.EXAMPLE_C_HEAD.replace(" ", ""))
    path.write_bytes(empty_file()[:P] + data + bytes(P - len(data)))
    with Store.open(path) as s:
        s.write(2, 0, b"xy")
        s.flush()
        s.flush()  # overwrites the Example C slot
    f = open_file(path)
    assert f.epoch == 3 and f.ids() == [1, 2] and f.read(1) == b"" and f.read(2) == b"xy"


def test_many_flushes_build_interior_pages(tmp_path):
    path = tmp_path / "deep.kladde"
    with Store.create(path) as s:
        for i in range(1, 300):
            s.write(i, 0, b"v")
            s.flush()
    f = open_file(path)
    assert f.ids() == list(range(1, 300))
    assert len(f.pages[0].children) <= 256


# -- CLI ------------------------------------------------------------------------------------

def test_cli(tmp_path, capsys):
    from bytewright.cli.main import main

    path = tmp_path / "cli.kladde"
    with Store.create(path) as s:
        s.write(7, 0, b"hello")
        s.flush()

    def run(*a):
        code = main(list(a))
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = run("kladde", "info", str(path))
    assert code == 0 and "epoch 1" in out, err
    code, out, _ = run("kladde", "dump", str(path))
    assert code == 0 and "Inline(7, 0, 68656c6c6f)" in out
    code, out, _ = run("kladde", "resolve", str(path), "7")
    assert code == 0 and "68656c6c6f" in out
    code, out, _ = run("kladde", "resolve", "--check", "--json", str(path))
    assert code == 0 and '"size": 5' in out
    bad = tmp_path / "bad.kladde"
    bad.write_bytes(bytes(2 * P))
    code, _, err = run("kladde", "info", str(bad))
    assert code == 1 and "not a kladde file" in err
