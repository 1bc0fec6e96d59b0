"""``bytewright bench``: throughput of the generated codecs against baselines."""

from __future__ import annotations

import argparse
import json

from .common import UsageError, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark generated codecs (ratios side by side)")
    p.add_argument("--entries", type=positive_int, default=100_000, help="HTT WAL INSERT entries")
    p.add_argument("--json", action="store_true")
    p.add_argument("--store", action="store_true",
                   help="also benchmark HTT store replay/compaction (runtime/htt)")
    p.add_argument("--replay", type=positive_int, default=1_000_000)
    p.add_argument("--compact", type=positive_int, default=100_000)
    p.add_argument("--kladde", action="store_true",
                   help="also benchmark kladde resolution vs decode-only (runtime/kladde)")
    p.add_argument("--kladde-statements", type=positive_int, default=1_000_000)
    p.add_argument("--ze", action="store_true",
                   help="also benchmark ZE WAL replay and graph node blocks vs struct (bench/ze.py)")
    p.add_argument("--ze-records", type=positive_int, default=20_000, help="ZE WAL records")
    p.add_argument("--ze-nodes", type=positive_int, default=20_000, help="ZE graph nodes")
    p.add_argument("--baselines", action="store_true",
                   help="the full comparison: every case against hand-written struct, Construct "
                        "and Kaitai (bench/harness.py), scaling/memory/--jobs "
                        "(bench/measure.py), and the table of targets met or not, with the "
                        "profiles of those missed (bench/targets.py); < 5 min")
    p.add_argument("--quick", action="store_true", help="with --baselines: small sizes (< 60 s)")
    p.add_argument("--large", action="store_true",
                   help="with --baselines: also HTT replay at 1M entries, a ~1 GB HTT file "
                        "and 1M kladde statements (several minutes, a few GB of RAM)")
    p.add_argument("--report", metavar="FILE", help="with --baselines: write the JSON report")
    p.add_argument("--no-profiles", dest="profiles", action="store_false",
                   help="with --baselines: skip the profiles of the targets missed")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the --baselines options alone would silently run the default benchmark instead
    alone = [opt for opt, given in (("--quick", args.quick), ("--large", args.large),
                                    ("--report", args.report is not None),
                                    ("--no-profiles", not args.profiles)) if given]
    if alone and not args.baselines:
        raise UsageError(f"{', '.join(alone)} only applies with --baselines "
                         f"(e.g. `bytewright bench --baselines {alone[0]}"
                         f"{' FILE' if alone[0] == '--report' else ''}`)")
    if args.baselines:
        import sys

        from ..bench import targets

        # progress on stderr, on a terminal only: stdout carries the table (or the JSON)
        log = (lambda s: print(s, file=sys.stderr, flush=True)) if sys.stderr.isatty() \
            else None
        rep = targets.run(args.quick, args.large, profiles=args.profiles, log=log)
        if args.report:
            with open(args.report, "w") as f:
                json.dump(rep, f, indent=2)
        print(json.dumps(rep, indent=2) if args.json else targets.format_table(rep))
        return 0
    from ..bench import htt_wal

    report = {"htt_wal_decode": htt_wal.bench(args.entries)}
    if args.store:
        from ..runtime.htt import bench as store_bench
        report["htt_store"] = store_bench.bench_htt_store(args.replay, args.compact)
    if args.kladde:
        from ..bench import kladde as kladde_bench
        report["kladde"] = kladde_bench.bench(args.kladde_statements)
    if args.ze:
        from ..bench import ze as ze_bench
        report["ze"] = ze_bench.bench(args.ze_records, args.ze_nodes)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    r = report["htt_wal_decode"]
    print(f"HTT WAL decode: {r['entries']:,} INSERT entries, {r['bytes']:,} bytes "
          f"(Construct timed on {r['construct_sampled_entries']:,} and scaled)")
    for name, rate in r["rates_per_s"].items():
        print(f"  {name:<10} {rate:>14,.0f} entries/s")
    print(f"  fast path (iter_wal_entry) vs hand-written struct: {r['ratio_fast_vs_baseline']:.2f}x")
    print(f"  fast path (decode_wal_entry per call) vs hand-written: "
          f"{r['ratio_fast_single_vs_baseline']:.2f}x")
    print(f"  fast path vs Construct interpreted: {r['ratio_fast_vs_construct']:.1f}x")
    print(f"  fast path vs Construct compiled: {r['ratio_fast_vs_compiled']:.1f}x")
    if "kladde" in report:
        from ..bench import kladde as kladde_bench
        print(kladde_bench.report(report["kladde"]))
    if "ze" in report:
        from ..bench import ze as ze_bench
        print(ze_bench.report(report["ze"]))
    if "htt_store" in report:
        print("HTT store:")
        for k, v in report["htt_store"].items():
            print(f"  {k}: {v}")
    return 0
