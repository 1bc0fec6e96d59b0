"""Runs many scenarios: per format, seeds ``seed .. seed+K-1``, optionally in parallel
processes and within a time budget, and sums what they injected and found."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from .formats import NAMES
from .scenario import Result, run_scenario

__all__ = ["Report", "default_dir", "run"]


def default_dir() -> str | None:
    """Scenario files go to a RAM disk when there is one: kills and faults need real
    files, not real disks, and fsync there costs nothing."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return None


@dataclass
class Report:
    fmt: str
    scenarios: int = 0
    kills: int = 0
    second_rounds: int = 0
    acked: int = 0
    seconds: float = 0.0
    faults: Counter = field(default_factory=Counter)
    damage: Counter = field(default_factory=Counter)
    variants: Counter = field(default_factory=Counter)
    failing: list[Result] = field(default_factory=list)

    def add(self, r: Result) -> None:
        self.scenarios += 1
        self.kills += r.kills
        self.second_rounds += r.rounds > 1
        self.variants[r.variant] += 1
        self.acked += r.acked
        self.seconds += r.seconds
        self.faults.update(r.faults)
        self.damage.update(r.damage)
        if r.findings:
            self.failing.append(r)

    @property
    def findings(self) -> int:
        return sum(len(r.findings) for r in self.failing)

    def summary(self) -> str:
        def show(c: Counter) -> str:
            return ",".join(f"{k}={v}" for k, v in sorted(c.items())) or "none"
        rate = self.scenarios / self.seconds if self.seconds > 0 else 0.0
        seeds = " ".join(str(r.seed) for r in self.failing[:20])
        more = " ..." if len(self.failing) > 20 else ""
        variants = f" variants[{show(self.variants)}]" if set(self.variants) - {"plain"} else ""
        return (f"{self.fmt}: scenarios={self.scenarios} ({rate:.1f}/s per core) "
                f"second-rounds={self.second_rounds} kills={self.kills} acked={self.acked}"
                f"{variants} faults[{show(self.faults)}] damage[{show(self.damage)}] "
                f"findings={self.findings} in {len(self.failing)} scenarios"
                + (f" (seeds {seeds}{more})" if self.failing else ""))


def _job(args: tuple[str, int, str | None, bool, bool]) -> Result:
    fmt, seed, base, keep, drops = args
    return run_scenario(fmt, seed, base, keep, drops)


def _line(r: Result, drops: bool) -> str:
    first = r.findings[0]
    more = f" (+{len(r.findings) - 1} more)" if len(r.findings) > 1 else ""
    flag = " --fsync-drops" if drops else ""
    return (f"FAIL {r.fmt} seed={r.seed}: {first}{more}  [re-run: python -m bytewright.torture "
            f"--format {r.fmt} --seed {r.seed} --scenarios 1{flag} -v]")


def run(formats: list[str], seed: int, scenarios: int, *, jobs: int = 1,
        budget: float | None = None, base: str | None = None, keep: bool = False,
        verbose: bool = False, out=sys.stdout, fsync_drops: bool = False
        ) -> dict[str, Report]:
    """Run ``scenarios`` scenarios per format; prints one line per failing scenario and
    returns the reports (the caller prints the summaries). ``fsync_drops``: some faulty
    scenarios make a failed fsync lose data (off by default)."""
    unknown = [f for f in formats if f not in NAMES]
    if unknown:
        raise ValueError(f"unknown format(s) {unknown}; known: {list(NAMES)}")
    reports = {f: Report(f) for f in formats}
    deadline = None if budget is None else time.monotonic() + budget
    # interleave the formats so a time budget is shared fairly among them
    work = [(f, seed + i, base, keep, fsync_drops) for i in range(scenarios) for f in formats]

    def take(r: Result) -> None:
        reports[r.fmt].add(r)
        if r.findings:
            print(_line(r, fsync_drops), file=out, flush=True)
            if verbose:
                for f in r.findings:
                    print(f"    {f}", file=out, flush=True)

    if jobs <= 1:
        for item in work:
            if deadline is not None and time.monotonic() > deadline:
                break
            take(_job(item))
        return reports
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(jobs, maxtasksperchild=200) as pool:
        for r in pool.imap_unordered(_job, work, chunksize=4):
            take(r)
            if deadline is not None and time.monotonic() > deadline:
                pool.terminate()
                break
    return reports
