"""``bytewright pile info|records|verify|amputate|reframe|salvage|diagnose|compact|migrate``.

``info`` counts records by form and kind and summarizes the indexes; ``records`` lists every
record in file order; ``verify`` also hashes every blob and checks every signature;
``amputate`` cuts a corrupt tail (``--truncate-to`` must repeat the boundary the reader
reports; damage with valid-looking records after it also needs ``--discard-after``; the cut
bytes go to ``FILE.discarded-OFFSET`` first); ``reframe --into DEST`` rewrites legacy records
in current framing; ``salvage --into DEST`` copies every record that still verifies, before
and after damage; ``diagnose record-at OFFSET`` shows what the reader sees at an offset;
``compact --into DEST`` is the conservative retained rewrite (every resident blob, opaque
frames carried); ``migrate FILE run record-kind-descriptions|monotone-wants`` appends what
the named migration owes (``--dry-run`` only counts).
Errors are one line; exit 1 on corrupt data or findings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pile", help="inspect, verify and repair Pile (triblespace) files")
    verbs = p.add_subparsers(dest="pile_verb", metavar="VERB")
    verbs.required = True
    for name, help_ in (("info", "record counts, indexes, and where reading stops"),
                        ("records", "every record in file order"),
                        ("verify", "info, plus every blob hash and every signature"),
                        ("amputate", "truncate a corrupt tail (never an unsupported record)"),
                        ("reframe", "rewrite legacy records in current framing into a new file"),
                        ("salvage", "copy every record that still verifies, before and after "
                                    "damage, into a new file"),
                        ("diagnose", "what the reader sees at an offset: diagnose record-at OFFSET FILE"),
                        ("compact", "conservative rewrite into a new file: every resident blob "
                                    "and opaque frame kept, retired PEER/STORE_SCOPE dropped"),
                        ("migrate", "append what a migration owes: migrate FILE run "
                                    "record-kind-descriptions|monotone-wants")):
        v = verbs.add_parser(name, help=help_)
        if name == "diagnose":
            v.add_argument("what", choices=["record-at"])
            v.add_argument("offset", type=_offset)
        v.add_argument("file", help="the pile ('-' reads standard input where nothing is written)")
        if name == "migrate":
            v.add_argument("what", choices=["run"])
            v.add_argument("migration", choices=list(MIGRATIONS))
            v.add_argument("--dry-run", action="store_true", help="count, append nothing")
        if name == "amputate":
            v.add_argument("--truncate-to", type=_offset, metavar="OFFSET",
                           help="the boundary the reader reports (see `pile info`)")
            v.add_argument("--discard-after", type=_offset, metavar="OFFSET",
                           help="cut even though valid-looking records follow the damage")
        if name in ("reframe", "salvage", "compact"):
            v.add_argument("--into", required=True, metavar="DEST", help="the new pile")
        v.add_argument("--json", action="store_true", help="machine-readable output")
        v.set_defaults(func=run)


MIGRATIONS = ("record-kind-descriptions", "monotone-wants")


def _offset(text: str) -> int:
    value = int(text, 0)
    if value < 0:
        raise argparse.ArgumentTypeError(f"offset must be >= 0, not {value}")
    return value


def run(args: argparse.Namespace) -> int:
    verb = args.pile_verb
    from . import common
    if verb in ("amputate", "reframe", "salvage", "compact", "migrate") and args.file == "-":
        raise common.UsageError(f"-: needs a file path, not standard input ({verb} writes files)")
    if args.file != "-" and os.path.isdir(args.file):
        raise common.InputError(f"{args.file}: is a folder, not a file")
    if verb in ("reframe", "salvage", "compact"):
        common.new_output(args.into, f"pile {verb}")
    return {"info": _info, "records": _records, "verify": _verify, "amputate": _amputate,
            "reframe": _reframe, "salvage": _salvage, "diagnose": _diagnose,
            "compact": _compact, "migrate": _migrate}[verb](args)


def _load(path: str):
    """A read-only pile: memory-mapped from a path, or the bytes of standard input."""
    from ..runtime.pile import Pile
    from .common import InputError, read_input
    if path == "-":
        return Pile.load(read_input(path), path, strict=False)
    if os.path.isdir(path):
        raise InputError(f"{path}: is a folder, not a file")
    pile = Pile.open(path, writable=False, refresh=False)
    pile.refresh_or_error()
    return pile


def _summary(pile) -> dict:
    err = pile.error
    return {
        "file": pile.path, "length": pile.size(), "records": pile.records,
        "valid_length": pile.applied,
        "status": "ok" if err is None else type(err).__name__,
        "error": None if err is None else str(err),
        "by_kind": {f"{form}/{name}": n for (form, name), n in sorted(pile.counts.items())},
        "blobs": len(pile.blobs), "collection_records": len(pile.collection),
        "collections": len(pile.by_collection), "proofs": len(pile.proofs),
        "wants": len(pile.wants), "pins": len(pile.pins), "opaque": len(pile.opaque),
    }


def _emit(args, data: dict, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print("\n".join(lines))


def _info(args) -> int:
    pile = _load(args.file)
    s = _summary(pile)
    lines = [f"{s['file']}: {s['length']} bytes, {s['records']} records, status {s['status']}"]
    if pile.error is not None:
        s["valid_after"] = pile.valid_after(pile.error.offset)
        from .common import plain
        lines.append(f"  reading stops at offset {pile.error.offset}: {plain(str(pile.error))} "
                     f"({s['valid_after']} valid-looking record(s) after it)")
    lines += [f"  {k}: {n}" for k, n in s["by_kind"].items()]
    lines.append(f"  blobs {s['blobs']}, collection records {s['collection_records']} in "
                 f"{s['collections']} collection(s), proofs {s['proofs']}, wants {s['wants']}, "
                 f"pins {s['pins']}, opaque {s['opaque']}")
    from .common import kept_lines
    lines += kept_lines(args.file)
    _emit(args, s, lines)
    if pile.error is not None:
        _report(args, pile.error)
    return 0 if pile.error is None else 1


def _report(args, problem, count: int = 1) -> None:
    """The one stderr line of a verb that found damage (its report is on stdout)."""
    from . import common
    if isinstance(problem, Exception):
        text = common.describe(problem, args.file)
    else:
        text = problem if problem.startswith(f"{args.file}:") else f"{args.file}: {problem}"
    common.report(args, text + (f" (and {count - 1} more finding(s))" if count > 1 else ""))


def _records(args) -> int:
    from ..runtime.mapped import released_as_walked
    from ..runtime.pile import CorruptPile, UnsupportedRecord, iter_records
    from .common import mapped_input
    rows, error = [], None
    with mapped_input(args.file) as (data, release):
        try:
            for rec in released_as_walked(iter_records(data, heads_only=True), release,
                                          lambda r: r.end):
                rows.append({"offset": rec.offset, "length": rec.length, "form": rec.form,
                             "record": rec.name, "kind": rec.kind.hex(), "span": rec.span})
        except (CorruptPile, UnsupportedRecord) as exc:
            error = exc
    lines = [f"{r['offset']:>10} {r['length']:>8} {r['form']:<10} {r['record']:<26} "
             f"{r['kind'][:16]}" for r in rows]
    if error is not None:
        from .common import plain
        lines.append(f"error: {plain(str(error))}")
        _emit(args, {"records": rows, "error": plain(str(error))}, lines)
        _report(args, error)
        return 1
    _emit(args, {"records": rows, "error": None}, lines)
    return 0


def _verify(args) -> int:
    from ..runtime.mapped import RELEASE_EVERY
    from ..runtime.pile import crypto
    from ..runtime.pile.errors import InvalidRecord
    from ..runtime.pile.store import BlobUnavailable, verify_proof
    pile = _load(args.file)
    findings = []
    if pile.error is not None:
        findings.append(str(pile.error))
    walked = 0
    from .common import progress
    bar = progress(len(pile.blobs), "hashing blobs", unit="blob")  # a terminal only
    for handle, offsets in pile.blobs.items():
        if bar is not None:
            bar.update(1)
        # every occurrence hashed once (all bad is what ``get`` refuses)
        bad = []
        for o in offsets:
            ok, length = _blob_check(pile, o, handle)
            walked += length
            if not ok:
                bad.append(o)
        if walked >= RELEASE_EVERY:  # the payloads read leave memory as the walk goes
            pile.release_pages()
            walked = 0
        if len(bad) == len(offsets):
            findings.append(str(BlobUnavailable.none_of(handle, len(offsets))))
        else:
            findings += [f"blob {handle.hex()} at offset {o}: payload does not match its handle "
                         "(a later occurrence is used)" for o in bad]
    if bar is not None:
        bar.close()
    checks = {"commit_body": crypto.commit_signature_ok, "v4_commit": crypto.commit_signature_ok,
              "env_commit_body": crypto.commit_signature_ok,
              "merge_v6_body": crypto.merge_signature_ok,
              "derive_v7_body": crypto.derive_signature_ok}
    for fp, entry in pile.collection.items():
        if not crypto.key_is_valid(entry.value.author) or not checks[entry.name](entry.value):
            findings.append(f"{entry.name} at offset {entry.offsets[0]} (fingerprint "
                            f"{fp.hex()}): signature does not verify")
    for pid, proof in pile.proofs.items():
        try:
            verify_proof(proof.value)
        except InvalidRecord as exc:
            findings.append(f"proof {pid.hex()} at offset {proof.offsets[0]}: {exc}")
    s = _summary(pile)
    s["findings"] = findings
    lines = [f"{s['file']}: {s['records']} records, {s['blobs']} blobs, "
             f"{s['collection_records']} collection records, {s['proofs']} proofs: "
             + ("ok" if not findings else f"{len(findings)} finding(s)")]
    lines += [f"  {f}" for f in findings]
    _emit(args, s, lines)
    if findings:
        _report(args, pile.error if pile.error is not None else findings[0], len(findings))
    return 0 if not findings else 1


def _blob_check(pile, offset: int, handle: bytes) -> tuple[bool, int]:
    """Whether the blob record at ``offset`` hashes to its handle, and the bytes read."""
    from ..runtime.pile.errors import CorruptPile, UnsupportedRecord
    from ..runtime.pile.scan import blob_hash_ok
    try:
        rec = pile.record_at(offset)
    except (CorruptPile, UnsupportedRecord):
        return False, 0
    return bool(blob_hash_ok(rec)), rec.length


def _amputate(args) -> int:
    import shlex

    from ..runtime.pile import UnsupportedRecord, amputate
    from ..runtime.pile.repair import find_damage
    from .common import UsageError, mapped_input
    expected = args.truncate_to if args.truncate_to is not None else args.discard_after
    if expected is None:
        with mapped_input(args.file) as (data, release):
            damage = find_damage(data, release)
        if damage is None:
            print(f"{args.file}: no damage; nothing to cut")
            return 0
        if isinstance(damage.error, UnsupportedRecord):
            raise damage.error  # never cut: a newer reader may know the marker
        # the command suggested is one amputate accepts: with valid-looking records after
        # the damage it needs --discard-after as well
        at = damage.offset
        cmd = f"bytewright pile amputate {shlex.quote(args.file)} --truncate-to {at}"
        if damage.valid_after:
            cmd += f" --discard-after {at}"
        raise UsageError(f"pile amputate: {args.file} is damaged at offset {at}"
                         + (f", followed by {damage.valid_after} valid-looking record(s)"
                            if damage.valid_after else "") + f"; to cut there: {cmd}")
    res = amputate(args.file, expected=expected, discard_after=args.discard_after)
    data = {"truncated": res.truncated, "valid_length": res.valid_length,
            "old_length": res.old_length, "discarded": res.discarded,
            "valid_after": res.valid_after}
    line = (f"{args.file}: truncated {res.old_length} -> {res.valid_length} bytes; cut bytes "
            f"kept in {res.discarded}" if res.truncated else f"{args.file}: no damage; nothing cut")
    _emit(args, data, [line])
    return 0


def _reframe(args) -> int:
    from ..runtime.pile import reframe
    res = reframe(args.file, args.into)
    data = {"written": res.written, "copied": res.copied, "blobs_restamped": res.blobs,
            "pins_replayed": res.pins, "preserved": res.preserved, "wants": res.wants,
            "retired_wants_resolved": res.retired_wants, "duplicates": res.duplicates,
            "dropped": dict(res.dropped), "bad_blobs": res.bad_blobs}
    dropped = sum(res.dropped.values())
    _emit(args, data, [f"{args.into}: {res.written} records ({res.blobs} blobs re-stamped, "
                       f"{res.copied} collection records and proofs, {res.wants} wants from "
                       f"{res.retired_wants} retired WANT frame(s) and current ones, "
                       f"{res.pins} pins replayed, {res.preserved} frames kept byte for byte); "
                       f"{res.duplicates} duplicate(s) written once, {dropped} retired "
                       f"record(s) dropped, {res.bad_blobs} blob(s) failing their hash dropped"])
    return 0


def _salvage(args) -> int:
    from ..runtime.pile import salvage
    res = salvage(args.file, args.into)
    data = {"kept": res.kept, "kept_bytes": res.kept_bytes, "skipped": res.skipped}
    gaps = ", ".join(f"[{a}, {b})" for a, b in res.skipped) or "none"
    _emit(args, data, [f"{args.into}: {res.kept} record(s), {res.kept_bytes} bytes kept; "
                       f"skipped byte ranges: {gaps}"])
    if res.kept == 0 and res.skipped:  # nothing in the input verifies: not a pile
        _report(args, f"{args.file}: no record verifies (skipped byte ranges: {gaps})")
        return 1
    return 0


def _diagnose(args) -> int:
    from ..runtime.pile import diagnose
    from .common import real_file
    with real_file(args.file) as path:  # ``-``: standard input in a temporary file
        out = diagnose(path, args.offset)
    if args.file == "-":
        out = {k: "-" if v == path else v for k, v in out.items()}
    from .common import plain
    lines = [f"{k}: {plain(str(v))}" for k, v in out.items() if k != "fields"]
    lines += [f"  {k}: {v}" for k, v in (out.get("fields") or {}).items()]
    _emit(args, out, lines)
    if out["status"] != "ok":
        why = str(out.get("error") or out["status"]).removeprefix(f"offset {args.offset}: ")
        _report(args, f"{args.file}:{args.offset}: {why}")
    return 0 if out["status"] == "ok" else 1


def _compact(args) -> int:
    from ..runtime.pile import Pile
    from ..runtime.pile.rewrite import rewrite_retained_into
    with Pile.open(args.file, writable=False) as pile:
        res = rewrite_retained_into(pile, args.into)
    data = {"blobs": res.blobs, "records": res.records, "opaque": res.opaque,
            "repeats": res.repeats, "dropped_blobs": res.dropped_blobs,
            "dropped": dict(res.dropped)}
    _emit(args, data, [f"{args.into}: {res.blobs} blob(s), {res.records} other record(s), "
                       f"{res.opaque} opaque frame(s) carried unchanged; {res.repeats} "
                       f"repeat(s) and {sum(res.dropped.values())} retired record(s) left "
                       f"behind"])
    return 0


def _migrate(args) -> int:
    from ..runtime.pile import Pile
    from ..runtime.pile.descriptions import publish_record_kind_descriptions
    from ..runtime.pile.migrate import monotone_wants
    with Pile.open(args.file, writable=not args.dry_run) as pile:
        if args.migration == "record-kind-descriptions":
            c = publish_record_kind_descriptions(pile, dry_run=args.dry_run)
            data = {"already_resident": c.already_resident, "left_to_store": c.left_to_store,
                    "stored": c.stored}
            line = (f"{args.file}: {c.already_resident} description blob(s) already resident, "
                    f"{c.left_to_store} left to store, {c.stored} stored")
        else:
            w = monotone_wants(pile, dry_run=args.dry_run)
            data = {"retired_frames": w.retired_frames, "active": w.active,
                    "already_current": w.already_current, "appended": w.appended}
            line = (f"{args.file}: {w.retired_frames} retired WANT frame(s) resolve to "
                    f"{w.active} active request(s); {w.already_current} already current, "
                    f"{w.appended} appended")
    _emit(args, data, [line])
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
