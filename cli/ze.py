"""``bytewright ze info|dump|verify FILE``: ZE WAL (family 11), graph WAL (family 19),
segment, manifest, frame and purge files; ``ze repair FILE [--discard-after OFFSET]`` and
``ze salvage FILE OUT`` for a damaged WAL.

The file kind is taken from the shared header's family id (bare WAL records and region
payloads have no header; use ``bytewright inspect`` for those). ``repair`` cuts a WAL at
its first bad record (what the appender's open does): a torn tail is cut, damage with
valid-looking records (any op) after it is refused in one line unless ``--discard-after``
repeats the reported offset; every cut keeps its bytes in ``FILE.discarded-OFFSET``.
``salvage`` writes every record that still verifies, before and after the damage, into a
new WAL for a human to judge (see docs/recovery.md). ``info``, ``dump`` and ``verify`` read
standard input for ``-`` and take ``--json``; errors are the one line of docs/cli.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
from pathlib import Path

from ..runtime.packed import PackedArray


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ze", help="ZE (zeppelin-embed) files: info, dump, verify")
    zsub = p.add_subparsers(dest="ze_verb", metavar="ACTION")
    zsub.required = True
    for name, help_ in (("info", "family, version and a one-screen summary"),
                        ("dump", "every decoded field as JSON"),
                        ("verify", "every checksum and rule; exit 1 on the first problem")):
        q = zsub.add_parser(name, help=help_)
        q.add_argument("file", type=Path, help="the file ('-' reads standard input)")
        q.add_argument("--json", action="store_true", help="machine-readable output"
                       + (" (dump always prints JSON)" if name == "dump" else ""))
        q.set_defaults(func=run, action=name)
    q = zsub.add_parser("repair", help="cut a WAL at its first bad record (refuses on "
                                       "damage in the middle)")
    q.add_argument("file", type=Path)
    q.add_argument("--discard-after", type=int, metavar="OFFSET",
                   help="cut at OFFSET (as info reported) although valid-looking records follow")
    q.set_defaults(func=run_repair, action="repair")
    q = zsub.add_parser("salvage", help="copy every WAL record that verifies into a new file")
    q.add_argument("file", type=Path)
    q.add_argument("out", type=Path)
    q.set_defaults(func=run_repair, action="salvage")


def run_repair(args: argparse.Namespace) -> int:
    """``repair`` and ``salvage``: errors raised for ``cli/main.py`` to print in the shared
    one-line shape (exit 1 data, 3 I/O)."""
    from ..runtime.mapped import mapped_file
    from ..runtime.ze import files
    from . import common

    if str(args.file) == common.STDIN:
        raise common.UsageError(f"-: needs a file path, not standard input ({args.action} "
                                 "writes files)")
    if args.file.is_dir():
        raise common.InputError(f"{args.file}: is a folder, not a file")
    # a missing path: exit 3, nothing created
    with mapped_file(args.file) as (data, release):
        if args.action == "repair":
            from ..runtime.ze import wal
            r = wal.replay(data, release=release)
            if r.terminator == "invalid_header":
                raise r.error
            del r  # its records are views of the map
    if args.action == "salvage":
        common.new_output(args.out)
        # read through a map, written piece by piece: neither file held in memory
        offsets = files.salvage_wal_file(args.file, args.out)
        print(f"{args.out}: {len(offsets)} verifying records copied from {args.file}")
        return 0
    with files.WalAppender(args.file, discard_after=args.discard_after) as app:
        r = app.replay
        if r.terminator == "clean":
            print(f"{args.file}: clean ({len(r.records)} records); nothing to cut")
        else:
            print(f"{args.file}: cut at offset {r.offset} ({r.reason}); "
                  f"{len(r.records)} records kept"
                  + (f"; cut bytes kept in {app.discarded}" if app.discarded else ""))
    return 0


def _plain(v):
    import numpy as np
    if isinstance(v, enum.Enum):
        return v.name
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, np.ndarray):
        return v.tolist() if v.dtype.names is None else [_plain(tuple(r)) for r in v]
    if isinstance(v, PackedArray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _open(data, release=None):
    from ..runtime.ze import artifacts, graphwal, registry, segment, wal
    hdr = registry.read_header(data)
    fam = registry.FAMILIES[hdr.family_id][0]
    if hdr.family_id == 11:
        # one pass: each payload is checked as its record is read, so commit need not
        # read the file again
        return fam, hdr, wal.replay(data, decode=True, release=release)
    if hdr.family_id == 19:
        return fam, hdr, graphwal.replay(data)
    if hdr.family_id == 2:
        return fam, hdr, segment.open_segment(data)
    if hdr.family_id == 10:
        return fam, hdr, artifacts.read_manifest(data)
    if hdr.family_id == 15:
        return fam, hdr, artifacts.read_purge(data)
    if hdr.family_id == 1:
        return fam, hdr, artifacts.read_frame(data)
    from ..runtime.errors import UnsupportedError
    raise UnsupportedError(f"no ze reader for family {fam}", offset=8, found=hdr.family_id)


def run(args: argparse.Namespace) -> int:
    from . import common

    # mapped, not read: the file is never copied, and a WAL's replay gives back the
    # pages it has walked, so memory does not grow with the file; ``-`` is read
    # (at most common.STDIN_MAX bytes)
    with common.mapped_input(args.file) as (data, release), \
            common.reading_progress(len(data)) as report:
        def walked(upto: int) -> None:  # the replay gives pages back as it walks: show it
            report(upto)
            release(upto)

        return _run(args, data, walked)


def _run(args: argparse.Namespace, data, release) -> int:
    from ..runtime.errors import BytewrightError
    from ..runtime.ze import wal
    from . import common

    fam, hdr, obj = _open(data, release)  # a BytewrightError: one line, exit 1 (main)
    units = None
    if fam == "wal" and args.action != "dump":
        try:
            done, held = wal.commit(obj.records)
            units = {"committed": len(done), "withheld": len(held)}
        except BytewrightError as exc:
            if args.action == "verify":
                raise
            units = {"error": f"payloads not decodable ({common.plain(exc.message)})"}
    if args.action == "info":
        return _info(args, data, fam, hdr, obj, units)
    if args.action == "dump":
        if fam == "segment":
            # opaque kinds (no codec) are shown by size only: skipped, not rejected
            out = {"header": _plain(obj.header),
                   "regions": {k: _plain(obj.region(k)) if obj.decodable(k) else
                               {"opaque": True, "length": e.length}
                               for k, e in obj.entries.items() if k != 7}}
        elif fam == "wal":
            out = {"first_seq": obj.first_seq, "terminator": obj.terminator,
                   "records": [{"seq": r.seq, "op": r.op,
                                "body": _plain(_safe_body(r))} for r in obj.records]}
        else:
            out = _plain(obj)
        print(json.dumps(out, indent=2, default=str))
        return 0
    # verify
    if fam == "segment":
        obj.validate_all()  # every region checksum, opaque and unknown kinds included
        for k in obj.entries:
            if obj.decodable(k):
                obj.region(k)
    problem, at = None, None
    if fam == "wal" and obj.terminator != "clean":
        problem, at = f"WAL ends with {obj.terminator}: {obj.error}", obj.offset
    if fam == "native_graph_wal" and obj.terminator != "clean":
        problem, at = (f"graph WAL ends with a torn tail ({len(obj.envelopes)} complete "
                       "envelopes)"), obj.torn_at
    if args.json:
        print(json.dumps({"file": str(args.file), "kind": fam, "family": hdr.family_id,
                          "version": hdr.family_version, "ok": problem is None,
                          "offset": at, "problem": common.plain(problem) if problem else None},
                         indent=2))
    elif problem is None:
        print(f"{args.file}: ok ({fam} v{hdr.family_version})")
    else:
        print(f"{args.file}: {common.plain(problem)} (offset {at})")
    if problem is not None:
        common.report(args, f"{common.where(args.file, at)}: {problem}")
        return common.EXIT_FINDINGS
    return 0


def _info(args: argparse.Namespace, data, fam: str, hdr, obj, units: dict | None) -> int:
    """``ze info``: a one-screen summary, or with ``--json`` the same as one object."""
    from . import common

    info: dict = {"file": str(args.file), "kind": fam, "family": hdr.family_id,
                  "version": hdr.family_version, "bytes": len(data)}
    lines = [f"{args.file}: ZE {fam} (family {hdr.family_id}) v{hdr.family_version}, "
             f"{len(data)} bytes"]
    if fam == "wal":
        info.update(first_seq=obj.first_seq, records=len(obj.records), units=units,
                    terminator=obj.terminator)
        what = (units["error"] if "error" in units else
                f"{units['committed']} committed units, {units['withheld']} withheld")
        lines.append(f"  first_seq {obj.first_seq}, {len(obj.records)} trusted records, "
                     f"{what}; end: {obj.terminator}"
                     + (f" at {obj.offset} ({obj.reason}, {obj.corruption})"
                        if obj.terminator == "corrupt" else ""))
        if obj.terminator == "corrupt":
            info.update(offset=obj.offset, reason=obj.reason, corruption=str(obj.corruption),
                        description=common.plain(obj.describe()))
            lines.append(f"  {common.plain(obj.describe())}")
    elif fam == "native_graph_wal":
        st = obj.state
        info.update(store=obj.header.store, first_commit_sequence=
                    obj.header.first_commit_sequence, envelopes=len(obj.envelopes),
                    next_sequence=obj.next_sequence if st else None,
                    generation=st.generation if st else None, terminator=obj.terminator,
                    torn_at=obj.torn_at)
        lines.append(f"  store {obj.header.store:#x}, first commit sequence "
                     f"{obj.header.first_commit_sequence}, {len(obj.envelopes)} envelopes"
                     + (f" (sequences {obj.header.first_commit_sequence}.."
                        f"{obj.next_sequence - 1}, generation {st.generation})" if st else "")
                     + f"; end: {obj.terminator}"
                     + (f" at {obj.torn_at}" if obj.torn_at is not None else ""))
    elif fam == "segment":
        h = obj.header
        info.update(rows=h.row_count, dims=h.dims, scheme=h.scheme.name,
                    regions=sorted(obj.entries), unknown=[e.kind for e in obj.unknown])
        lines.append(f"  rows {h.row_count}, dims {h.dims}, scheme {h.scheme.name}, regions "
                     f"{sorted(obj.entries)}, unknown {[e.kind for e in obj.unknown]}")
    kept = common.kept_lines(str(args.file))
    info["kept"] = [ln.strip() for ln in kept]
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        print("\n".join(lines + kept))
    return 0


def _safe_body(rec):
    from ..runtime.errors import DecodeError
    from ..runtime.ze import wal
    try:
        return wal.decode_body(rec)
    except DecodeError as exc:
        return {"undecodable": str(exc), "payload": rec.payload.hex()}
