"""``bytewright kladde info|dump|resolve|fold|salvage FILE``: a kladde file's address table
and journal.

``info`` shows the governing header, counts and the journal (transactions, why reading
stopped, valid-looking transactions after damage); ``dump`` every reachable table page
with its child refs and statements (absolute ids and offsets, after the cursor rules);
``resolve`` every allocation's size and fragments, or with ``ID`` one allocation's content
as hex (``--current``: the journal replayed over the committed state); ``fold`` opens the
file for writing, which replays the journal into a new epoch, and refuses when
valid-looking transactions follow damage unless ``--discard-after OFFSET`` names the
offset ``info`` reported (the cut bytes still go to ``FILE.discarded-OFFSET``, as a
torn tail's do), and when the governing header is the older slot because the newer one
is damaged while a journal of the newer epoch still verifies;
``salvage FILE OUT`` writes every transaction that still verifies, before and after the
damage, into a new kladde file for a human to judge. Errors are one line: exit 1 for
corrupt data or a refusal, 2 for usage, 3 for I/O or an output that exists (docs/cli.md,
docs/recovery.md). ``-`` reads standard input (into memory) for every verb but ``fold``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kladde", help="inspect a kladde file (header, table pages, allocations)")
    verbs = p.add_subparsers(dest="kladde_verb", metavar="VERB")
    verbs.required = True
    for name, help_ in (("info", "governing header slot, epoch, counts and the journal"),
                        ("dump", "every reachable address-table page and its statements"),
                        ("resolve", "resolved allocations (or one allocation's content)"),
                        ("fold", "replay the journal into a new epoch (the writer open)"),
                        ("salvage", "copy every transaction that verifies into a new file")):
        v = verbs.add_parser(name, help=help_)
        v.add_argument("file", help="the kladde file" + ("" if name == "fold" else
                                                          " ('-' reads standard input)"))
        if name == "resolve":
            v.add_argument("id", nargs="?", type=int, help="allocation id: print its bytes")
            v.add_argument("--check", action="store_true",
                           help="also check the same-epoch no-conflict rules")
            v.add_argument("--current", action="store_true",
                           help="the current state: the journal replayed over the committed one")
        if name == "fold":
            v.add_argument("--discard-after", type=int, metavar="OFFSET",
                           help="cut the journal at OFFSET (as info reported) even though "
                                "valid-looking transactions follow it")
        if name == "salvage":
            v.add_argument("out", help="the new kladde file to write (must not exist)")
        v.add_argument("--json", action="store_true")
        v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..runtime.kladde import open_file
    from ..runtime.kladde.reader import KladdeFile
    from . import common

    verbs = {"info": _info, "dump": _dump, "resolve": _resolve, "fold": _fold,
             "salvage": _salvage}
    if args.file == common.STDIN:
        if args.kladde_verb == "fold":
            raise common.UsageError("-: needs a file path, not standard input (fold writes the file)")
        # at most common.STDIN_MAX bytes, read into memory
        return verbs[args.kladde_verb](KladdeFile(common.read_input(args.file), name="-"), args)
    if os.path.isdir(args.file):
        raise common.InputError(f"{args.file}: is a folder, not a file")
    try:
        # the reading verbs map the file (memory follows the pages read, not the file);
        # fold and salvage write, so they read it
        kf = open_file(args.file, mapped=args.kladde_verb in ("info", "dump", "resolve"))
        return verbs[args.kladde_verb](kf, args)
    except _Refused as exc:
        raise common.Findings(f"{args.file}: {exc}") from exc


def _print_json_list(items) -> None:
    """Print ``json.dumps(list(items), indent=2)`` without holding the list."""
    first = True
    for item in items:
        body = json.dumps(item, indent=2).replace("\n", "\n  ")
        sys.stdout.write(("[\n  " if first else ",\n  ") + body)
        first = False
    sys.stdout.write("[]\n" if first else "\n]\n")


class _Refused(Exception):
    """A repair that would cut valid-looking data without --discard-after."""


def _journal_data(j) -> dict:
    return {"segment_epoch": j.segment_epoch, "first_page": j.first_page,
            "transactions": len(j.transactions), "records": len(j.records),
            "pages": j.pages, "stop": j.stop, "stop_offset": j.stop_offset,
            "detail": j.detail, "valid_after": j.valid_after,
            "valid_after_offsets": j.valid_after_offsets}


def _fold(kf, args) -> int:
    import warnings

    from ..runtime.kladde import Store
    from ..runtime.kladde import journal as jn

    j = jn.journal_of(kf)
    if j.damaged and args.discard_after != j.stop_offset:
        raise _Refused(f"journal damaged at offset {j.stop_offset} with {j.valid_after} "
                       f"valid-looking transactions after it; run `bytewright kladde salvage` "
                       f"first, or pass --discard-after {j.stop_offset} to cut there")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported below, in one line
        with Store.open(args.file, discard_after=args.discard_after) as store:
            out = {"epoch": store.epoch, "folded_transactions": len(j.transactions),
                   "discarded": store.discarded}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.file}: folded {len(j.transactions)} journal transactions into epoch "
              f"{out['epoch']}" + (f"; cut bytes kept in {store.discarded}"
                                   if store.discarded else ""))
    return 0


def _salvage(kf, args) -> int:
    from ..runtime.kladde import Store
    from ..runtime.kladde import journal as jn

    txns = jn.salvage(kf.data)
    recovered = len(jn.journal_of(kf).transactions)
    from .common import new_output

    new_output(args.out)  # before anything is written
    with Store.create(args.out) as out:
        for alloc_id, content in kf.contents().items():  # the committed state
            out.write(alloc_id, 0, content)
        out.flush()
        for t in txns:  # each verifying transaction, in order, as one journal transaction
            for rec in t.records:
                jn.apply_record(out, rec)
            out.commit()
    info = {"out": args.out, "transactions": len(txns), "before_damage": recovered,
            "after_damage": len(txns) - recovered,
            "offsets": [t.offset for t in txns]}
    if args.json:
        print(json.dumps(info))
    else:
        print(f"{args.out}: committed state plus {len(txns)} verifying transactions in its "
              f"journal ({recovered} before the damage, {len(txns) - recovered} after it)")
    return 0


def _info(kf, args) -> int:
    from ..runtime.kladde import journal as jn

    h = kf.header
    data = {
        "slot": kf.slot, "epoch": kf.epoch, "pages": kf.npages,
        "table_pages": len(kf.pages), "statements": len(kf.statements),
        "allocations": len(kf.ids()),
        "header": {"format_version": h.format_version,
                   "min_reader_version": h.min_reader_version,
                   "root_allocation": h.root_allocation, "schema_table": h.schema_table,
                   "consolidator_state": h.consolidator_state,
                   "root_fingerprint": h.root_fingerprint.hex(),
                   "journal_pointer": h.journal_pointer},
        "journal": _journal_data(jn.journal_of(kf)),
        "header_slots": _slots(kf),
    }
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"{args.file}: kladde, header slot {kf.slot}, epoch {kf.epoch}, {kf.npages} pages")
    print(f"  {len(kf.pages)} address-table pages, {len(kf.statements)} statements, "
          f"{data['allocations']} allocations")
    for k, v in data["header"].items():
        print(f"  {k}: {v}")
    for line in data["header_slots"]:
        print(f"  {line}")
    print(f"  {jn.journal_of(kf).describe()}")
    from .common import kept_lines
    for line in kept_lines(args.file):
        print(line)
    return 0


def _slots(kf) -> list[str]:
    from ..runtime.kladde.reader import slot_report

    return slot_report(kf.mv)


def _dump(kf, args) -> int:
    by_page: dict[int, list] = {}
    for st in kf.statements:
        by_page.setdefault(st.page, []).append(st)
    pages = []
    for info in kf.pages:
        sts = by_page.get(info.page, [])
        pages.append({"page": info.page, "epoch": info.epoch, "children": info.children,
                      "statements": [st.describe() for st in sts]})
    if args.json:
        print(json.dumps(pages, indent=2))
        return 0
    for p in pages:
        head = "header slot" if p["page"] < 2 else "table page"
        print(f"{head} {p['page']} (epoch {p['epoch']}): children {p['children']}")
        for text in p["statements"]:
            print(f"  {text}")
    return 0


def _resolve(kf, args) -> int:
    from ..runtime.kladde import check_no_conflicts
    from ..runtime.kladde import journal as jn
    from ..runtime.kladde.reader import FRAG_INLINE, FRAG_REF

    if args.check:
        check_no_conflicts(kf)
    if args.current:
        cur = jn.current_state(kf)
        if args.id is None:
            out = [{"id": i, "size": cur.size(i)} for i in cur.ids()]
            if args.json:
                print(json.dumps(out, indent=2))
            else:
                for a in out:
                    print(f"allocation {a['id']}: size {a['size']}")
            return 0
    if args.id is not None:
        content = cur.read(args.id) if args.current else kf.read(args.id)
        if args.json:
            print(json.dumps({"id": args.id, "size": len(content), "hex": content.hex()}))
        else:
            print(f"allocation {args.id}: {len(content)} bytes")
            for i in range(0, len(content), 32):
                print(f"  {i:08x}  {content[i:i + 32].hex()}")
        return 0
    names = {0: "zero", FRAG_INLINE: "inline", FRAG_REF: "ref"}

    def rows():
        for alloc_id, alloc in kf.iter_allocations():
            frags = [{"start": a, "end": b, "from": names[kind],
                      **({"address": src} if kind == FRAG_REF else {})}
                     for a, b, kind, src in alloc.fragments]
            yield {"id": alloc_id, "size": alloc.size, "fragments": frags}

    # every allocation resolved and its data pages checked first (an error prints
    # nothing on stdout, as when the whole list was built), then printed one at a time
    # (the list of a 1 GiB file's fragments held ~65 MB)
    from . import common

    bar = common.progress(None, "resolving", unit=" allocations")  # a terminal only
    for _ in kf.iter_allocations():
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    if args.json:
        _print_json_list(rows())
        return 0
    for a in rows():
        parts = ", ".join(f"[{f['start']},{f['end']}) {f['from']}"
                          + (f"@{f['address']}" if "address" in f else "")
                          for f in a["fragments"])
        print(f"allocation {a['id']}: size {a['size']}" + (f": {parts}" if parts else ""))
    return 0
