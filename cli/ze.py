"""``bytewright ze info|dump|verify FILE``: ZE WAL (family 11), graph WAL (family 19),
segment, manifest, frame and purge files.

The file kind is taken from the shared header's family id (bare WAL records and region
payloads have no header; use ``bytewright inspect`` for those).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ze", help="ZE (zeppelin-embed) files: info, dump, verify")
    zsub = p.add_subparsers(dest="ze_verb", metavar="ACTION")
    zsub.required = True
    for name, help_ in (("info", "family, version and a one-screen summary"),
                        ("dump", "every decoded field as JSON"),
                        ("verify", "every checksum and rule; exit 1 on the first problem")):
        q = zsub.add_parser(name, help=help_)
        q.add_argument("file", type=Path)
        q.set_defaults(func=run, action=name)


def _plain(v):
    import numpy as np
    if isinstance(v, enum.Enum):
        return v.name
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, np.ndarray):
        return v.tolist() if v.dtype.names is None else [_plain(tuple(r)) for r in v]
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _open(data: bytes):
    from ..runtime.ze import artifacts, graphwal, registry, segment, wal
    hdr = registry.read_header(data)
    fam = registry.FAMILIES[hdr.family_id][0]
    if hdr.family_id == 11:
        return fam, hdr, wal.replay(data)
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
    from ..runtime.errors import BytewrightError
    from ..runtime.ze import wal
    data = args.file.read_bytes()
    try:
        fam, hdr, obj = _open(data)
        if fam == "wal" and args.action != "dump":
            try:
                done, held = wal.commit(obj.records)
                units = f"{len(done)} committed units, {len(held)} withheld"
            except BytewrightError as exc:
                if args.action == "verify":
                    raise
                units = f"payloads not decodable ({exc.message})"
        if args.action == "info":
            print(f"{args.file}: ZE {fam} (family {hdr.family_id}) v{hdr.family_version}, "
                  f"{len(data)} bytes")
            if fam == "wal":
                print(f"  first_seq {obj.first_seq}, {len(obj.records)} trusted records, "
                      f"{units}; end: {obj.terminator}"
                      + (f" at {obj.offset} ({obj.reason}, {obj.corruption})"
                         if obj.terminator == "corrupt" else ""))
            elif fam == "native_graph_wal":
                st = obj.state
                print(f"  store {obj.header.store:#x}, first commit sequence "
                      f"{obj.header.first_commit_sequence}, {len(obj.envelopes)} envelopes"
                      + (f" (sequences {obj.header.first_commit_sequence}.."
                         f"{obj.next_sequence - 1}, generation {st.generation})" if st else "")
                      + f"; end: {obj.terminator}"
                      + (f" at {obj.torn_at}" if obj.torn_at is not None else ""))
            elif fam == "segment":
                h = obj.header
                print(f"  rows {h.row_count}, dims {h.dims}, scheme {h.scheme.name}, regions "
                      f"{sorted(obj.entries)}, unknown {[e.kind for e in obj.unknown]}")
            return 0
        if args.action == "dump":
            if fam == "segment":
                out = {"header": _plain(obj.header),
                       "regions": {k: _plain(obj.region(k)) for k in obj.entries if k != 7}}
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
            obj.validate_all()
            for k in obj.entries:
                obj.region(k)
        if fam == "wal" and obj.terminator != "clean":
            print(f"{args.file}: WAL ends with {obj.terminator} at {obj.offset}: {obj.error}")
            return 1
        if fam == "native_graph_wal" and obj.terminator != "clean":
            print(f"{args.file}: graph WAL ends with a torn tail at {obj.torn_at} "
                  f"({len(obj.envelopes)} complete envelopes)")
            return 1
        print(f"{args.file}: ok ({fam} v{hdr.family_version})")
        return 0
    except BytewrightError as exc:
        print(f"{args.file}: {exc}")
        return 1


def _safe_body(rec):
    from ..runtime.errors import DecodeError
    from ..runtime.ze import wal
    try:
        return wal.decode_body(rec)
    except DecodeError as exc:
        return {"undecodable": str(exc), "payload": rec.payload.hex()}
