"""``bytewright kladde info|dump|resolve FILE [ID]``: inspect a kladde file's address table.

``info`` shows the governing header and counts; ``dump`` every reachable table page with
its child refs and statements (absolute ids and offsets, after the cursor rules);
``resolve`` every allocation's size and fragments, or with ``ID`` one allocation's
content as hex. Errors are reported with their page and offset; exit code 1.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kladde", help="inspect a kladde file (header, table pages, allocations)")
    verbs = p.add_subparsers(dest="kladde_verb", metavar="VERB")
    verbs.required = True
    for name, help_ in (("info", "governing header slot, epoch, page and statement counts"),
                        ("dump", "every reachable address-table page and its statements"),
                        ("resolve", "resolved allocations (or one allocation's content)")):
        v = verbs.add_parser(name, help=help_)
        v.add_argument("file")
        if name == "resolve":
            v.add_argument("id", nargs="?", type=int, help="allocation id: print its bytes")
            v.add_argument("--check", action="store_true",
                           help="also check the same-epoch no-conflict rules")
        v.add_argument("--json", action="store_true")
        v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..runtime.errors import BytewrightError
    from ..runtime.kladde import open_file

    try:
        kf = open_file(args.file)
        return {"info": _info, "dump": _dump, "resolve": _resolve}[args.kladde_verb](kf, args)
    except BytewrightError as exc:
        print(f"{args.file}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{args.file}: error: {exc}", file=sys.stderr)
        return 1


def _info(kf, args) -> int:
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
    }
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"{args.file}: kladde, header slot {kf.slot}, epoch {kf.epoch}, {kf.npages} pages")
    print(f"  {len(kf.pages)} address-table pages, {len(kf.statements)} statements, "
          f"{data['allocations']} allocations")
    for k, v in data["header"].items():
        print(f"  {k}: {v}")
    return 0


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
    from ..runtime.kladde.reader import FRAG_INLINE, FRAG_REF

    if args.check:
        check_no_conflicts(kf)
    if args.id is not None:
        content = kf.read(args.id)
        if args.json:
            print(json.dumps({"id": args.id, "size": len(content), "hex": content.hex()}))
        else:
            print(f"allocation {args.id}: {len(content)} bytes")
            for i in range(0, len(content), 32):
                print(f"  {i:08x}  {content[i:i + 32].hex()}")
        return 0
    names = {0: "zero", FRAG_INLINE: "inline", FRAG_REF: "ref"}
    out = []
    for alloc_id, alloc in kf.allocations().items():
        frags = [{"start": a, "end": b, "from": names[kind],
                  **({"address": src} if kind == FRAG_REF else {})}
                 for a, b, kind, src in alloc.fragments]
        out.append({"id": alloc_id, "size": alloc.size, "fragments": frags})
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for a in out:
        parts = ", ".join(f"[{f['start']},{f['end']}) {f['from']}"
                          + (f"@{f['address']}" if "address" in f else "")
                          for f in a["fragments"])
        print(f"allocation {a['id']}: size {a['size']}" + (f": {parts}" if parts else ""))
    return 0
