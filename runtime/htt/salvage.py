"""``salvage``: every WAL record that still verifies, before and after damage, copied
into a new file for a human to judge (kSkipAnyCorruptedRecords, never applied in place;
see :mod:`.recovery` and docs/recovery.md). Built on the store, so it sits above it."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...generated.htt import (
    WalBlock,
    WalEntry,
    WalHeader,
    encode_wal_block,
    encode_wal_entry,
    encode_wal_header,
)
from .durability import MAX_BLOCK_ENTRIES, fsync_dir, write_all
from .errors import StoreError
from .recovery import BASE_SEQ_FIELD, all_survivors
from .store import Store


@dataclass
class SalvageReport:
    source: str
    dest: str
    damage_offset: int | None
    reason: str | None
    kept_before: int
    kept_after: int
    # (original file offset, original seq, new seq, op name, key) per record copied
    records: list[tuple[int | None, int, int, str, str]]

    def to_dict(self) -> dict:
        return {"source": self.source, "dest": self.dest,
                "damage_offset": self.damage_offset, "reason": self.reason,
                "kept_before": self.kept_before, "kept_after": self.kept_after,
                "records": [{"offset": o, "seq": s, "new_seq": n, "op": op, "key": k}
                            for o, s, n, op, k in self.records]}


def salvage(source: str, dest: str) -> SalvageReport:
    """Write ``dest``: ``source``'s header and snapshot verbatim, then every WAL record
    that still verifies (the intact prefix, then the valid-looking records past the
    damage, in file order), renumbered contiguously so the new file replays them all.
    ``source`` is only read; ``dest`` must not exist."""
    with Store.open(source, readonly=True) as store:
        scan = store.scan
        before = store.committed_entries()
        with open(source, "rb") as fh:
            whole = fh.read()
    prefix = whole[:scan.wal_offset]
    damage = scan.damage
    layout = store.layout
    # the open keeps the first few survivors; salvage copies every one
    after = all_survivors(whole, damage, layout) if damage is not None else []
    del whole
    base = scan.base_seq
    if damage is not None and damage.suspect == BASE_SEQ_FIELD and not before and after:
        # the header's base is the damaged field: the entries' own (CRC-covered) seqs
        # are the ones to keep, so a replica's positions stay valid
        base = after[0].entry.seq
    records: list[tuple[int | None, int, int, str, str]] = []
    out_entries: list[WalEntry] = []
    for e in before:
        records.append((None, e.seq, base + len(out_entries), e.op.name, e.key))
        out_entries.append(WalEntry(base + len(out_entries), e.op, e.key, e.body))
    for s in after:
        e = s.entry
        records.append((s.offset, e.seq, base + len(out_entries), e.op.name, e.key))
        out_entries.append(WalEntry(base + len(out_entries), e.op, e.key, e.body))
    data = bytearray(prefix)
    data += encode_wal_header(WalHeader(len(out_entries), base))
    if layout.block_compressed:
        for i in range(0, len(out_entries), MAX_BLOCK_ENTRIES):
            data += encode_wal_block(WalBlock(out_entries[i:i + MAX_BLOCK_ENTRIES]),
                                     **layout.block_params())
    else:
        for e in out_entries:
            data += encode_wal_entry(e, **layout.entry_params())
    try:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise StoreError(f"{dest}: already exists; salvage writes a new file only") from None
    try:
        write_all(fd, bytes(data), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(dest)
    return SalvageReport(source, dest, None if damage is None else damage.offset,
                         None if damage is None else damage.reason, len(before), len(after),
                         records)
