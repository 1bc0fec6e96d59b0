"""Verify files: detect each file's family from the ``detect`` rules and decode it whole
through the generated fast path, every declared checksum included.

The work is plain functions over bytes so that ``verify_many`` can run files in a process
pool: the detection table is plain data built once by the parent, and each worker resolves
the project to import its generated modules. Files are mapped (``mmap``), not read.
"""

from __future__ import annotations

import mmap
import os
import time
from typing import Any

from ..generator.plan import eval_expr as _eval
from ..generator.plan import stream_plan
from ..runtime.errors import BytewrightError, DecodeError
from ..runtime.mapped import RELEASE_EVERY, releaser

HEAD = 512  # bytes read for detection (the longest rule looks at the first page header)

# per process: the detection table (plain data, built once by the parent from the
# families, because loading and validating the schemas costs seconds) and the project
_TABLE: list[tuple] | None = None
_PROJECT: Any = None


def detection_table(families: dict[str, Any]) -> list[tuple]:
    """Every family's ``detect`` rules as plain, picklable tuples
    ``(at, magic, family, record, params, repeat, then, plan)``; ``plan`` is the
    record's streaming plan (``stream_plan``) or None."""
    from . import inspector

    table = []
    for fam in families.values():
        for rule in fam.detect:
            plan = stream_plan(fam, rule.record)
            for at, magic in inspector.magics(fam, rule):
                table.append((at, bytes(magic), fam.name, rule.record, dict(rule.params),
                              bool(rule.repeat), rule.then, plan))
    return table


class _Unplanned(Exception):
    """The plan met something it does not model: decode the record whole instead."""




def _stream(mod: Any, plan: tuple, buf: Any, pos: int, end: int,
            params: dict[str, Any], release: Any = None) -> int:
    """Walk one record by ``plan`` from ``pos``; the end offset. Items of ``eos``
    repeats are decoded and dropped one at a time, so memory does not grow with them;
    ``release(upto)``, when given, is called every ``RELEASE_EVERY`` bytes so that the
    pages of a mapped file already walked leave the process's resident set."""
    defaults, fields = plan
    env = {**defaults, **params}
    for name, mode, target, cond, arg_src, sub in fields:
        if cond is not None and not _eval(cond, env):
            env[name] = None
            continue
        args = {k: _eval(src, env) for k, src in arg_src}
        if mode == "whole":
            env[name], pos = getattr(mod, f"decode_{target}")(buf, pos, **args)
        elif mode == "stream":
            pos = _stream(mod, sub, buf, pos, end, args, release)
            env[name] = None  # not kept: a later field reading it falls back below
        else:
            dec = getattr(mod, f"decode_{target}")
            mark = pos + RELEASE_EVERY
            while pos < end:
                _item, nxt = dec(buf, pos, **args)  # dropped at the next item
                if nxt <= pos:
                    raise _Unplanned("zero-size item")
                pos = nxt
                if release is not None and pos >= mark:
                    release(pos)
                    mark = pos + RELEASE_EVERY
            env[name] = None
    return pos


def detect(head: bytes, table: list[tuple]) -> tuple | None:
    """The rule whose magic matches ``head``; the longest magic wins (as ``inspect``)."""
    best = None
    for row in table:
        at, magic = row[0], row[1]
        if head[at:at + len(magic)] == magic and (best is None or len(magic) > len(best[1])):
            best = row
    return best


def _init(table: list[tuple], project_path: str | None) -> None:
    """Per process: keep the table and resolve the project (to import its modules)."""
    global _TABLE, _PROJECT
    from ..generator import project as project_mod

    _TABLE = table
    if _PROJECT is None:
        _PROJECT = project_mod.resolve(project_path)


def decode_buffer(buf: Any, mod: Any, record: str, params: dict[str, Any],
                  repeat: bool = False, then: str | None = None,
                  plan: tuple | None = None, release: Any = None) -> tuple[int, int]:
    """Decode ``buf`` entirely as ``record`` (or a run of them, or one then a run of
    ``then``) with the generated module ``mod``; (records decoded, bytes after them).

    A family whose detected record is a file's head only (kladde's header page, followed
    by pages the runtime reaches through the address tree) leaves bytes no layout of
    the record covers: they are counted and shown, not silently called verified.

    With a ``plan`` (``stream_plan``) the first record is walked item by item; if
    that fails in any way, the record is decoded whole, so that a bad file reports
    exactly the error (offset, field path) the whole decode gives.
    """
    end = len(buf)
    dec = getattr(mod, f"decode_{record}")
    pos = -1
    if plan is not None:
        try:
            pos = _stream(mod, plan, buf, 0, end, params, release)
        except Exception:  # noqa: BLE001 - any failure: the whole decode is the authority
            pos = -1
    if pos < 0:
        value, pos = dec(buf, 0, **params)
        del value  # only the checks matter; drop the object so memory does not grow
    count = 1
    if repeat or then:
        nxt = getattr(mod, f"decode_{then}") if then else dec
        args = {} if then else params
        mark = pos + RELEASE_EVERY
        while pos < end:
            value, pos = nxt(buf, pos, **args)
            count += 1
            if release is not None and pos >= mark:
                # a file that is a run of records (a pile): without this its whole map
                # stays resident, and the peak grows with the file
                release(pos)
                mark = pos + RELEASE_EVERY
    return count, end - pos


def verify_one(path: str) -> dict[str, Any]:
    """Detect and decode one file; a result dict (never raises for bad data).
    ``_init`` must have run in this process."""
    assert _TABLE is not None and _PROJECT is not None
    t0 = time.perf_counter()
    res: dict[str, Any] = {"path": path, "ok": False, "family": None, "record": None,
                           "bytes": 0, "records": 0}
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            res["bytes"] = size
            if size == 0:
                res["error"] = "empty file"
                return res
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                _decode_mapped(mm, res)
            finally:
                try:
                    mm.close()
                except BufferError:
                    # a decoded value still holds a view of the map: the collector unmaps it
                    pass
    except OSError as exc:
        res["error"] = f"{exc.strerror or exc}"
    finally:
        res["seconds"] = round(time.perf_counter() - t0, 6)
    return res


def _decode_mapped(mm: mmap.mmap, res: dict[str, Any]) -> None:
    """Detect and decode the mapped bytes into ``res``. Errors are recorded here, inside,
    so that no traceback (whose frames hold views of the map) outlives the decode."""
    found = detect(mm[:HEAD], _TABLE)
    if found is None:
        res["error"] = f"no family recognises these bytes ({mm[:16].hex()})"
        return
    _, _, family, record, params, repeat, then = found[:7]
    plan = found[7] if len(found) > 7 else None
    res["family"], res["record"] = family, record
    mod = _PROJECT.load_module(family)
    try:
        res["records"], res["uncovered"] = decode_buffer(memoryview(mm), mod, record, params,
                                                         repeat, then, plan, _releaser(mm))
        res["ok"] = True
    except DecodeError as exc:
        res.update(error=exc.message, offset=exc.offset, field=exc.path)
    except BytewrightError as exc:
        res["error"] = str(exc)


def _releaser(mm: mmap.mmap) -> Any:
    """``release(upto)`` for a read-only map (``runtime/mapped.py``)."""
    return releaser(mm)


def verify_many(files: list[str], table: list[tuple], jobs: int = 1,
                project_path: str | None = None) -> list[dict[str, Any]]:
    """``verify_one`` over ``files``; results in input order whatever ``jobs`` is."""
    if jobs <= 1 or len(files) <= 1:
        _init(table, project_path)
        return [verify_one(f) for f in files]
    from concurrent.futures import ProcessPoolExecutor  # only for --jobs: a cost

    with ProcessPoolExecutor(max_workers=min(jobs, len(files)), initializer=_init,
                             initargs=(table, project_path)) as pool:
        # map keeps input order; small chunks balance big files, and more than one file
        # per round trip keeps a folder of tiny files from being all IPC
        chunk = max(1, min(16, len(files) // (jobs * 8)))
        return list(pool.map(verify_one, files, chunksize=chunk))


