"""``Store.info()`` of a read-only open, read in one pass at file speed: the header, the
snapshot and the WAL are decoded and checked exactly as an open checks them (same
errors, offsets and field paths), but the entries are counted (``census.Census``), not
built into the tree. Memory holds a decode window and 8 bytes per key, not the file.

A file whose counts need the tree (``census.NeedsTree``: a repeated key, a DELETE of a
node with children) is opened as before; ``Survey.streamed`` says which way it went.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from dataclasses import dataclass

from ...generated.htt import decode_snapshot_section, iter_snapshot_entry
from ..errors import DecodeError
from . import limits as _limits
from . import replay
from .census import Census, NeedsTree
from .describe import describe
from .layout import FileLayout
from .locking import lock_shared, read_all, unlock
from .quantized import TailCodec
from .state import depth_of

log = logging.getLogger("bytewright.htt")

_SNAP_HEAD = struct.Struct("<II")  # snap_byte_len, snap_node_count (§3)
_CRC = struct.Struct("<I")
_DEFAULT_BOUNDS = (0.0, 1.0)  # store.DEFAULT_BOUNDS (a read-only open passes none)


@dataclass
class Survey:
    info: dict  # the keys and values of Store.info() for a read-only open
    scan: replay.WalScan
    layout: FileLayout
    streamed: bool  # False: the counts needed the tree and came from a full open
    why_tree: str | None = None

    def checks(self) -> list[str]:
        """What reading the file checked, in the words ``htt verify`` prints."""
        done = ["header CRC", "snapshot entries and CRC",
                "WAL records (CRC, sequence, ops)"]
        if self.streamed:
            done.append("counts streamed (no tree built)")
        else:
            done.append(f"counts from a full replay ({self.why_tree})")
        return done


# what a full open and the streamed survey both report, compared by ``deep_check``
_COUNTED = ("live_nodes", "synthesized_ancestors", "current_epoch", "wal_entries",
            "next_seq", "wal_truncated_at")


def deep_check(path: str, streamed: dict, *, limits: _limits.Limits | None = None
               ) -> list[str]:
    """Replay ``path`` into the full tree (``Store.open(readonly=True)``) and return
    a problem line for every count that differs from ``streamed`` (``Survey.info``)."""
    from .store import Store

    store = Store.open(path, readonly=True, limits=limits)
    try:
        full = store.info()
    finally:
        store.close()
    return [f"full replay gives {k} {full[k]}, the streamed read {streamed[k]}"
            for k in _COUNTED if full[k] != streamed[k]]


def survey(path: str, *, limits: _limits.Limits | None = None) -> Survey:
    """Describe ``path`` as ``Store.open(path, readonly=True).info()`` does, locking and
    mapping the file the same way, without holding its nodes."""
    from .store import Store, _map_readonly, _unmap

    path = os.fspath(path)
    limits = limits or _limits.Limits()
    fd = os.open(path, os.O_RDONLY)
    mapped = None
    try:
        if lock_shared(fd, path, wait=False):
            mapped = _map_readonly(fd)
        else:
            log.info("%s: a writer is active; reading without a lock", path)
        buf = read_all(fd) if mapped is None else mapped
        if mapped is None:
            unlock(fd)
        try:
            return _survey(path, buf, limits)
        except NeedsTree as why:
            reason = str(why)
    finally:
        if mapped is not None:
            _unmap(mapped)
        unlock(fd)
        os.close(fd)
    store = Store.open(path, readonly=True, limits=limits)
    try:
        return Survey(store.info(), store.scan, store.layout, False, reason)
    finally:
        store.close()


def _survey(path: str, buf, limits: _limits.Limits) -> Survey:
    prefix = replay.read_prefix(buf, path)
    layout = prefix.layout
    census = Census(TailCodec(prefix.header.semantic_dims, layout.tail_layout))
    with replay.bulk_load():
        wal_offset = _snapshot(buf, prefix, census, path, limits)
        scan = replay.scan_wal(buf, wal_offset, layout, census.apply, path, limits=limits)
    return Survey(_info(path, prefix, census, scan), scan, layout, True)


def _snapshot(buf, prefix: replay.Prefix, census: Census, path: str,
              limits: _limits.Limits) -> int:
    """Feed the snapshot's keys to ``census`` in the order a load links them; returns
    the WAL offset. A v2+ uncompressed snapshot is read entry by entry, its CRC
    computed as it goes; anything else, and any doubt, goes through the strict decoder
    (``replay.load_snapshot``'s), so a damaged snapshot fails with its error."""
    layout = prefix.layout
    at = prefix.snapshot_offset
    size = len(buf)
    if layout.version >= 2 and at + _SNAP_HEAD.size <= size:
        byte_len, count = _SNAP_HEAD.unpack_from(buf, at)
        start = at + _SNAP_HEAD.size
        end = start + byte_len
        if (count == 0 or not layout.flags.compressed) and end + _CRC.size <= size \
                and count * 8 <= byte_len:
            ok = _stream_snapshot(buf, start, end, count, layout, census, first=True)
            if ok and layout.flags.meaning_addressed:
                # §9: a full reader depth-sorts a v3 snapshot before replay, so every
                # ancestor that has an entry is linked before its descendants: link
                # every key first, then synthesize only what no entry provides
                _stream_snapshot(buf, start, end, count, layout, census, first=False)
            if ok:
                replay._release(buf, 0, end)
                return end + _CRC.size
            # the strict decoder names the damage; the census has seen part of it
            _strict_snapshot(buf, prefix, Census(census.codec), path, limits)
            raise NeedsTree("the snapshot streamed and decoded whole disagree")
    return _strict_snapshot(buf, prefix, census, path, limits)


def _stream_snapshot(buf, start: int, end: int, count: int, layout: FileLayout,
                     census: Census, *, first: bool) -> bool:
    """One pass over the entries in ``buf[start:end]``; False when they do not decode
    as exactly ``count`` entries ending at ``end`` under a matching CRC."""
    if not first:
        add = census.ensure_parent
    elif layout.flags.meaning_addressed:
        add = census.add_unlinked
    else:
        add = census.add_loaded
    crc = 0
    done = start  # bytes before this are in ``crc`` and released
    n = 0
    stop = start
    try:
        for entry, stop in iter_snapshot_entry(buf, start, end, **layout.entry_params()):
            add(entry.key)
            n += 1
            if stop - done >= replay.WINDOW:
                if first:
                    crc = zlib.crc32(buf[done:stop], crc)
                replay._release(buf, done, stop)
                done = stop
    except DecodeError:
        return False
    if n != count or stop != end:
        return False
    if first:
        crc = zlib.crc32(buf[done:end], crc)
        return crc == _CRC.unpack_from(buf, end)[0]
    return True


def _strict_snapshot(buf, prefix: replay.Prefix, census: Census, path: str,
                     limits: _limits.Limits) -> int:
    layout = prefix.layout
    try:
        if layout.flags.compressed:
            _limits.check_snapshot_size(buf, prefix.snapshot_offset, limits)
        section, end = decode_snapshot_section(buf, prefix.snapshot_offset,
                                               **layout.snapshot_params())
        keys = [e.key for e in section.entries]
        if layout.version == 1:
            replay._check_v1_snapshot(section.entries, prefix.snapshot_offset)
    except DecodeError as exc:
        raise replay._tag(exc, path) from None
    del section
    if layout.flags.meaning_addressed:
        keys.sort(key=depth_of)
    for key in keys:
        census.add_loaded(key)
    replay._release(buf, 0, end)
    return end


def _info(path: str, prefix: replay.Prefix, census: Census, scan: replay.WalScan) -> dict:
    """``Store.info()`` of a read-only open (same keys, same order)."""
    if prefix.bounds is not None:
        bounds = [(b.min, b.max) for b in prefix.bounds]
    else:
        bounds = [_DEFAULT_BOUNDS] * prefix.layout.user_dims
    return describe(path, prefix.header, scan, live_nodes=census.live,
                    base_seq=scan.base_seq, next_seq=scan.next_seq,
                    header_count=scan.header_count, epoch=census.epoch,
                    synthesized=census.synthesized, bounds=bounds)
