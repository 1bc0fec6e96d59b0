"""``bytewright htt info|dump|verify|compact|salvage FILE``: inspect and maintain .htt
stores. Maintenance never cuts intact records silently (docs/recovery.md): ``compact``
refuses on WAL damage that valid-looking records follow unless ``--discard-after
OFFSET`` repeats the offset the reader reported; ``salvage`` copies every record that
still verifies into a new file."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os

from ..runtime.errors import DecodeError
from . import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("htt", help="open, verify and compact HTT (.htt) stores")
    hsub = p.add_subparsers(dest="htt_cmd", metavar="CMD")
    hsub.required = True
    for name, func, help_ in (
        ("info", _info, "header, counts, WAL state, epochs and sidecars"),
        ("dump", _dump, "every live node (data, metadata, semantic placement)"),
        ("verify", _verify, "check header/snapshot CRCs and the WAL; exit 1 if truncated"),
        ("compact", _compact, "fold the WAL into a new snapshot (atomic replace)"),
        ("salvage", _salvage, "copy every WAL record that still verifies, before and "
                              "after damage, into a new file"),
    ):
        c = hsub.add_parser(name, help=help_)
        c.add_argument("file", help="the store" + (" ('-' reads standard input)" if name in
                                                    ("info", "dump", "verify", "salvage")
                                                    else ""))
        c.add_argument("--json", action="store_true", help="machine-readable output")
        c.set_defaults(func=func)
        if name == "dump":
            c.add_argument("--wal", action="store_true", help="also list the WAL entries")
            c.add_argument("--reserved", action="store_true",
                           help="show the format's own '_' metadata too")
        if name == "verify":
            c.add_argument("--deep", action="store_true",
                           help="also replay the file into the full tree and check that "
                                "it agrees with the streamed counts")
        if name == "compact":
            c.add_argument("--archive", action="store_true",
                           help="archive the WAL span to a history sidecar first")
            c.add_argument("--discard-after", type=_offset, metavar="OFFSET", default=None,
                           help="cut a WAL damaged in the middle at OFFSET (the offset "
                                "'htt info' reports); the cut bytes are kept in "
                                "FILE.discarded-OFFSET")
        if name == "salvage":
            c.add_argument("--into", required=True, metavar="DEST",
                           help="the new file to write (must not exist)")


@contextlib.contextmanager
def _quiet_library_log():
    """The verbs print what the runtime's warnings say (damage, cuts) themselves, in one
    line; keep the library's log lines off stderr unless the user configured logging."""
    log = logging.getLogger("bytewright.htt")
    quiet = not logging.getLogger().handlers and not log.handlers
    old = log.level
    if quiet:
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(old)


def _offset(text: str) -> int:
    value = int(text, 0)
    if value < 0:
        raise argparse.ArgumentTypeError(f"offset must be >= 0, got {text}")
    return value


def _open(path: str, **kw):
    from ..runtime.htt.replay import reading_progress
    from ..runtime.htt.store import Store

    size = os.path.getsize(path) if os.path.isfile(path) else 0
    with _quiet_library_log(), common.reading_progress(size, "replaying") as report, \
            reading_progress(report):
        return Store.open(path, **kw)


def _reading(func):
    """A reading verb takes ``-``: standard input goes to a temporary file the store
    opens (``common.real_file``); messages still name ``-``."""
    import functools

    @functools.wraps(func)
    def run(args) -> int:
        from . import common

        if args.file != common.STDIN:
            return func(args)
        with common.real_file(args.file, ".htt") as tmp:
            args.real = tmp
            return func(args)
    return run


def _path(args) -> str:
    """The file to open: the temporary copy of standard input for ``-``."""
    return getattr(args, "real", None) or args.file


def _fail(args, exc: Exception, code: int | None = None) -> int:
    """One line on stderr (and with --json one JSON object on stdout) for a failure, in
    the shape and with the exit code every verb shares (cli/common.py)."""
    from . import common

    message = common.describe(exc, args.file)
    code = common.exit_code(exc) if code is None else code
    if args.json:
        print(json.dumps({"ok": False, "error": message, "type": type(exc).__name__,
                          "offset": getattr(exc, "offset", None)}))
    common.report(args, message)
    return code


def _data_repr(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
        if text.isprintable():
            return repr(text)
    except UnicodeDecodeError:
        pass
    return "0x" + data.hex()


def _survey(path: str):
    from ..runtime.htt.replay import reading_progress
    from ..runtime.htt.survey import survey

    size = os.path.getsize(path) if os.path.isfile(path) else 0
    with _quiet_library_log(), common.reading_progress(size) as report, \
            reading_progress(report):
        return survey(path)


@_reading
def _info(args) -> int:
    try:
        found = _survey(_path(args))
    except (DecodeError, OSError) as exc:
        return _fail(args, exc)
    info = found.info
    info["path"] = args.file
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    flags = [k for k, v in info["flags"].items() if v is True]
    print(f"{args.file}: HTT v{info['version']}, flags 0x{info['flags']['byte']:02x} "
          f"({', '.join(flags) or 'none'}"
          f"{'; ' + info['flags']['algorithm'] if info['flags']['compressed'] else ''})")
    print(f"  dimension {info['dimension']}, semantic_dims {info['semantic_dims']}, "
          f"tau {info['tau']}")
    print(f"  live nodes {info['live_nodes']} (header node_count {info['header_node_count']},"
          f" advisory)")
    print(f"  WAL: base seq {info['wal_base_seq']}, {info['wal_entries']} entries "
          f"(header count {info['wal_header_count']}), next seq {info['next_seq']}")
    print(f"  current epoch {info['current_epoch']}")
    if info["wal_truncated"]:
        print(f"  WAL TRUNCATED at offset {info['wal_truncated_at']}: {info['wal_truncated']}")
        damage = info["wal_damage"]
        if damage and damage["records_after"]:
            print(f"  WAL DAMAGED at offset {damage['offset']} ({damage['reason']}): "
                  f"{damage['records_after']} valid-looking record(s) follow; `htt compact` "
                  f"refuses; `htt salvage` copies them out")
        elif damage:
            print(f"  {damage['reason']} at offset {damage['offset']}, nothing valid after "
                  f"it: a writer open cuts it, keeping the bytes in "
                  f"{args.file}.discarded-{damage['offset']}")
        suspect = found.scan.damage.suspect if found.scan.damage is not None else None
        if suspect:
            print(f"  the first WAL entry does not carry {suspect} (no checksum covers "
                  f"that field): a writer open refuses; `htt salvage` copies the records")
    for side in info["discarded_files"]:
        print(f"  bytes cut by an earlier recovery kept in {side}")
    if info["sidecars"]:
        print(f"  history sidecars: {', '.join(info['sidecars'])}")
    return 0


@_reading
def _dump(args) -> int:
    try:
        store = _open(_path(args), readonly=True)
    except (DecodeError, OSError) as exc:
        return _fail(args, exc)
    nodes = []
    for view in store.iterate():
        item = {"key": view.key, "data_hex": view.data.hex(),
                "meta": [[k, v] for k, v in view.meta.items()],
                "semantic": list(view.semantic) if view.semantic is not None else None}
        if args.reserved:
            item["reserved"] = store.reserved_meta(view.key)
        nodes.append(item)
    wal = []
    if args.wal:
        for e in store.committed_entries():
            wal.append({"seq": e.seq, "op": e.op.name, "key": e.key, "body": repr(e.body)})
    if args.json:
        out = {"nodes": nodes}
        if args.wal:
            out["wal"] = wal
        print(json.dumps(out, indent=2))
        return 0
    for item, view in zip(nodes, store.iterate(), strict=True):
        line = f"{view.key}  data={_data_repr(view.data)}"
        if view.meta:
            line += "  meta={" + ", ".join(f"{k}={v}" for k, v in view.meta.items()) + "}"
        if args.reserved:
            line += f"  reserved={item['reserved']}"
        if view.semantic is not None:
            line += "  semantic=[" + ", ".join(f"{v:.6g}" for v in view.semantic) + "]"
        print(line)
    for w in wal:
        print(f"wal seq {w['seq']} {w['op']} {w['key']!r} {w['body']}")
    return 0


@_reading
def _verify(args) -> int:
    import types

    from ..runtime.htt import history, sidecars
    from ..runtime.htt.survey import deep_check

    try:
        found = _survey(_path(args))
    except (DecodeError, OSError) as exc:
        return _fail(args, exc)
    info = found.info
    problems, warnings = [], []
    if info["wal_truncated"]:
        damage = info["wal_damage"] or {}
        problems.append(f"WAL truncated at offset {info['wal_truncated_at']} "
                        f"({damage.get('reason', 'damage')}; "
                        f"{damage.get('records_after', 0)} valid-looking record(s) after "
                        f"it): {info['wal_truncated']}")
    if info["wal_header_count"] not in (None, info["wal_entries"]):
        warnings.append(f"advisory wal_entry_count {info['wal_header_count']} != "
                        f"{info['wal_entries']} entries found")
    checks = found.checks()
    if args.deep:
        try:
            with _quiet_library_log():
                problems.extend(deep_check(args.file, info))
        except (DecodeError, OSError) as exc:
            return _fail(args, exc)
        checks.append("full replay into the tree, counts compared")
    else:
        checks.append("full replay not run (--deep runs it)")
    # Each sidecar is checked as HistoryReader checks it, one at a time and dropped:
    # building a HistoryReader would open the store a second time and keep every
    # entry of the WAL and of every sidecar in memory, only to count the segments.
    layout = found.layout
    del found
    segments = 0
    try:
        for seg_path in sidecars.sidecar_paths(_path(args)):
            why = history.HistoryReader._check(types.SimpleNamespace(layout=layout), seg_path)
            if isinstance(why, str):
                history.log.warning("%s: history segment skipped: %s", seg_path, why)
            else:
                segments += 1
            del why
        if segments != len(info["sidecars"]):
            problems.append(f"{len(info['sidecars']) - segments} unreadable history sidecar(s)")
    except DecodeError as exc:
        problems.append(str(exc))
        segments = 0
    ok = not problems
    from .common import plain

    problems, warnings = [plain(p) for p in problems], [plain(w) for w in warnings]
    if args.json:
        print(json.dumps({"ok": ok, "problems": problems, "warnings": warnings,
                          "live_nodes": info["live_nodes"], "wal_entries": info["wal_entries"],
                          "sidecars": segments}, indent=2))
    else:
        status = "OK" if ok else "PROBLEMS"
        print(f"{args.file}: {status} - header and snapshot CRCs verified, "
              f"{info['wal_entries']} WAL entries intact, {info['live_nodes']} live nodes, "
              f"{segments} history sidecar(s)")
        print(f"  checks: {'; '.join(checks)}")
        for p in problems:
            print(f"  problem: {p}")
        for w in warnings:
            print(f"  warning: {w}")
    if not ok:
        from . import common

        at = info["wal_truncated_at"] if info["wal_truncated"] else None
        common.report(args, f"{common.where(args.file, at)}: {problems[0]}"
                      + (f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1
                         else ""))
    return 0 if ok else 1


def _writes_a_file(args) -> int | None:
    """``compact`` changes the file it is given: ``-`` is a usage error."""
    from .common import STDIN, UsageError

    if args.file == STDIN:
        return _fail(args, UsageError("-: needs a file path, not standard input "
                                      "(compact changes the file)"))
    return None


def _compact(args) -> int:
    from ..runtime.htt.errors import StoreError, WalDamaged

    if (code := _writes_a_file(args)) is not None:
        return code
    try:
        store = _open(args.file, history_retention="archive" if args.archive else None,
                      recovery="tolerate_corrupted_tail", discard_after=args.discard_after)
    except WalDamaged as exc:
        return _fail(args, exc)
    except (DecodeError, OSError, StoreError) as exc:
        return _fail(args, exc)
    if store.discarded and not args.json:
        d = store.discarded
        print(f"{args.file}: cut {d['bytes']} byte(s) at offset {d['offset']} "
              f"({d['reason']}; {d['records_after']} valid-looking record(s)); kept in "
              f"{d['path']}")
    try:
        result = store.compact()
    except (OSError, StoreError) as exc:
        store.close()
        return _fail(args, exc)
    store.close()
    if args.json:
        print(json.dumps(result | {"discarded": store.discarded}, indent=2))
    else:
        print(f"{args.file}: compacted {result['node_count']} nodes into "
              f"{result['file_bytes']} bytes; WAL base seq {result['wal_base_seq']}"
              f"{' (epoch re-stamped)' if result['restamp'] else ''}")
        for p in result["archived"]:
            print(f"  archived history to {p}")
    return 0


@_reading
def _salvage(args) -> int:
    from ..runtime.htt import salvage
    from ..runtime.htt.errors import StoreError
    from . import common

    try:
        common.new_output(args.into)
        with _quiet_library_log():
            report = salvage.salvage(_path(args), args.into)
    except (DecodeError, OSError, StoreError, common.CliError) as exc:
        return _fail(args, exc)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    where = ("no damage" if report.damage_offset is None else
             f"damage at offset {report.damage_offset} ({report.reason})")
    print(f"{args.file}: {where}; wrote {args.into} with {report.kept_before} record(s) "
          f"before the damage and {report.kept_after} after it (renumbered from seq "
          f"{report.records[0][2] if report.records else '-'})")
    for offset, seq, new, op, key in report.records:
        if offset is not None:
            print(f"  offset {offset}: seq {seq} -> {new} {op} {key!r}")
    return 0
