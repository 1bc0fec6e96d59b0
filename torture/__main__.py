"""``python -m bytewright.torture``: run seeded torture scenarios against the formats."""

from __future__ import annotations

import argparse
import sys

from .formats import NAMES
from .runner import default_dir, run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bytewright.torture", description=__doc__)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--format", choices=NAMES, action="append",
                       help="a format to torture (repeatable)")
    which.add_argument("--all", action="store_true", help="every shipped format")
    ap.add_argument("--seed", type=int, default=0, help="first scenario seed (default 0)")
    ap.add_argument("--scenarios", type=int, default=100, help="scenarios per format")
    ap.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                    help="stop starting scenarios after this many seconds")
    ap.add_argument("--jobs", type=int, default=1, help="parallel worker processes")
    ap.add_argument("--dir", default=None, help="where scenario files go (default: "
                    "/dev/shm when writable, else the system temp dir)")
    ap.add_argument("--fsync-drops", action="store_true",
                    help="in some faulty scenarios a failed fsync loses the data written "
                    "since the last successful one")
    ap.add_argument("--keep", action="store_true", help="keep the files of every scenario")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every finding")
    args = ap.parse_args(argv)
    formats = list(NAMES) if args.all else args.format
    reports = run(formats, args.seed, args.scenarios, jobs=args.jobs,
                  budget=args.time_budget, base=args.dir or default_dir(), keep=args.keep,
                  verbose=args.verbose, fsync_drops=args.fsync_drops)
    for rep in reports.values():
        print(rep.summary())
    return 1 if any(r.failing for r in reports.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
