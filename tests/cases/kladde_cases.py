"""kladde golden fixtures as field values (facts.md §6.1 Examples A-C and each statement form).

``write.py`` encodes each case into ``fixtures/kladde/<name>.hex``; ``tests/test_kladde.py``
re-encodes every case, requires the stored bytes to match, and compares the Example A-C
bytes with the hex given in facts.md.
"""

from __future__ import annotations

from bytewright.generated import kladde as k

Tag = k.StatementTag
Kind = k.PageKind


def header(**kw) -> k.HeaderFields:
    base = dict(format_version=0, min_reader_version=0, root_allocation=0, schema_table=0,
                consolidator_state=0, root_fingerprint=bytes(16), journal_pointer=2)
    base.update(kw)
    return k.HeaderFields(**base)


def example_b_content() -> k.TableContent:
    """The statements of the R-STMT unit test (facts.md §6.1 Example B)."""
    return k.TableContent([4, 5], [
        k.Statement(3, Tag.Ref, k.RefBody(0, 100, 20491)),
        k.Statement(0, Tag.Zero, k.ZeroBody(0, 20)),
        k.Statement(0, Tag.Shrink, k.ShrinkBody(0)),
        k.Statement(4, Tag.Tombstone, None),
        k.Statement(2, 7, k.InlineBody(0, b"\x01\x02\x03")),
        k.Statement(0, Tag.Grow, k.GrowBody(47)),
        k.Statement(991, Tag.Ref, k.RefBody(7, 1, 11)),
    ])


EXAMPLE_A_HEAD = (
    "8b4b4c41444445 0d0a1a0a 0c 0000 0000 00000000 00000000 00000000 "
    "00000000000000000000000000000000 02000000 01 0000000000000000 0100 00 b7942194")
EXAMPLE_B_CONTENT = ("040500 030000648ba001 00010014 000200 0404 020700010203 00032f "
                     "df070007010b")
EXAMPLE_B_HEAD = "01 0400000000000000 2200 " + EXAMPLE_B_CONTENT + " 32d99224"
EXAMPLE_C_HEAD = (
    "8b4b4c414444450d0a1a0a 0c 0000 0000 01000000 00000000 00000000 "
    "00000000000000000000000000000000 03000000 01 0100000000000000 0400 00010300 1a47acc7")


def cases():
    empty = k.TableContent([], [])
    yield ("example_a_empty_header", "header_page", {},
           k.HeaderPage(header(), Kind.AddressTable, 0, empty),
           "facts.md 6.1 Example A: page 0 of a freshly created file (epoch 0, content 00)")
    yield ("example_a_header_slot", "header_slot", {},
           k.HeaderSlot(header(), Kind.AddressTable, 0, b"\x00"),
           "Example A through the opaque header-slot record the slot choice uses")
    yield ("example_b_table_page", "table_page", {},
           k.TablePage(Kind.AddressTable, 4, example_b_content()),
           "facts.md 6.1 Example B: an AddressTable page, epoch 4, every statement kind")
    yield ("example_b_content", "table_content", {}, example_b_content(),
           "Example B content alone (34 bytes)")
    yield ("example_c_slot1_header", "header_page", {},
           k.HeaderPage(header(root_allocation=1, journal_pointer=3), Kind.AddressTable, 1,
                        k.TableContent([], [k.Statement(1, Tag.Grow, k.GrowBody(0))])),
           "facts.md 6.1 Example C: a minimal slot-1 header, epoch 1, Grow(1, 0)")
    yield ("data_page", "page", {}, k.Page(Kind.Data, 7, b"hello, kladde"),
           "a Data page, epoch 7, 13 content bytes")
    yield ("data_page_full", "page", {}, k.Page(Kind.Data, 2, bytes(range(256)) * 15 + b"x" * 241),
           "a Data page with the maximum 4081 content bytes")
    yield ("statement_ref_max", "statement", {},
           k.Statement(2**32 - 1, Tag.Ref, k.RefBody(2**32 - 4082, 4081, 2**48 - 4096 + 11)),
           "a wide Ref: 20 bytes (5 + 1 + 5 + 2 + 7); 21 only once sizes need 3 bytes (64 KiB pages)")
    yield ("statement_zero", "statement", {}, k.Statement(1, Tag.Zero, k.ZeroBody(300, 16384)),
           "Zero(1, 300, 16384): varints AC 02 and 80 80 01")
    yield ("statement_shrink", "statement", {}, k.Statement(5, Tag.Shrink, k.ShrinkBody(127)),
           "Shrink with n delta 127 (7F)")
    yield ("statement_grow", "statement", {}, k.Statement(0, Tag.Grow, k.GrowBody(128)),
           "Grow with n delta 128 (80 01)")
    yield ("statement_tombstone", "statement", {}, k.Statement(9, Tag.Tombstone, None),
           "Tombstone: id delta and tag only")
    yield ("statement_inline_1", "statement", {}, k.Statement(1, 5, k.InlineBody(0, b"\xff")),
           "the smallest Inline: size_tag 5, one payload byte")
    yield ("statement_inline_251", "statement", {},
           k.Statement(1, 255, k.InlineBody(2, bytes(range(251)))),
           "the largest Inline: size_tag 255, 251 payload bytes")
    # -- the journal (facts.md §8) ------------------------------------------------------
    JT = k.JournalTag
    every = [
        k.JournalRecord(JT.Free, k.JournalFree(7)),
        k.JournalRecord(JT.Resize, k.JournalResize(1, 300)),
        k.JournalRecord(JT.Write, k.JournalWrite(1, 5, b"abc")),
        k.JournalRecord(JT.Splice, k.JournalSplice(1, 2, 1, b"xy")),
        k.JournalRecord(JT.Copy, k.JournalCopy(1, 0, 3, 2, 4)),
        k.JournalRecord(JT.Move, k.JournalCopy(2, 1, 2, 2, 0)),
    ]
    yield ("journal_records_every_kind", "journal_records", {}, k.JournalRecords(every),
           "one record of each tag 1..6, ids absolute: Free, Resize, Write, Splice, Copy, Move")
    yield ("journal_write_max", "journal_record", {},
           k.JournalRecord(JT.Write, k.JournalWrite(2**32 - 1, 2**32 - 2, b"z")),
           "Write at the bound: id 2**32-1, offset + len = 2**32-1")
    yield ("journal_transaction", "journal_transaction", {},
           k.JournalTransaction(bytes.fromhex("0107"), 0xB5A7EFA8),
           "the first transaction of segment 1, Free(7): length 2, records, then the chain CRC-32C of seed(1) + 02 01 07")
    yield ("journal_page_trailer", "journal_page", {},
           k.JournalPage(bytes(range(256)) * 15 + bytes(248), 9, 0xDDCCBBAA),
           "a journal page: 4088 stream bytes, trailer next = 9 and its chain CRC")
    yield ("journal_seed", "journal_seed", {}, k.JournalSeed(8),
           "the chain seed of segment 8 (the epoch as 8 LE bytes)")
