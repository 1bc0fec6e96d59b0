"""One seeded scenario: plan, run the writers (threads, or forked processes that may be
killed), inject damage, check; then, in some scenarios, a second round on the repaired
store (writers, maintenance, damage again, and a check of both rounds' writes).

Everything a scenario does is drawn from ``random.Random(f"{format}:{seed}")`` (the first
round) and ``random.Random(f"{format}:{seed}:more")`` (the store's variant, the second
round, fsync drops: drawn apart so the first round of a seed stays what it was), so
``--seed N --scenarios 1`` replays scenario N. Within a thread the fault schedule and crash
point are replayed exactly; how threads and processes interleave, and the instant a timed
SIGKILL lands, depend on the scheduler (a re-run hits the same plan, not always the same
interleaving).
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import tempfile
import threading
import time
import traceback
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field

from .check import Checked, check_store
from .damage import KINDS as DAMAGE_KINDS
from .damage import damage_file
from .faults import KINDS as FAULT_KINDS
from .faults import Faults, read_drops
from .formats import Format, load
from .oracle import Ack, read_oracles
from .workers import maintenance_loop, writer_loop

__all__ = ["Plan", "Result", "make_plan", "run_scenario"]

HANG_SECONDS = 30.0
SECOND_ROUND = 0.5  # share of scenarios that run a second round on the repaired store
FSYNC_DROPS = 0.5  # share of faulty scenarios whose failed fsyncs lose data (when enabled)
ROUND2_SEED = 1 << 40  # the second round's writers and faults draw from other seeds


@dataclass
class Plan:
    forked: bool
    procs: int
    threads: int
    ops: int
    lengths: tuple[int, int]
    maintenance: int  # steps (0: none)
    fault_rate: float
    fault_kinds: tuple[str, ...]
    timed_kills: dict[int, float]  # process index -> seconds after start
    crash_points: dict[int, tuple[int, bool]]  # process index -> (call number, torn)
    damage: tuple[str, ...]  # damage kinds allowed (empty: no damage)
    damage_events: int
    drop: bool = False  # a failed fsync loses the data written since the last one
    refusals: bool = False  # the store may refuse writes (damage a repair left in place)


def make_plan(rng: random.Random) -> Plan:
    forked = rng.random() < 0.35
    procs = rng.randint(1, 3) if forked else 1
    threads = rng.randint(1, 2) if forked else rng.randint(1, 3)
    big = rng.random() < 0.1
    lengths = (16, 4096) if big else (16, 200)
    faulty = rng.random() < 0.4
    kinds = tuple(k for k in FAULT_KINDS if rng.random() < 0.6) if faulty else ()
    timed: dict[int, float] = {}
    crashes: dict[int, tuple[int, bool]] = {}
    if forked:
        for p in range(procs + 1):  # the last index is the maintenance process
            r = rng.random()
            if r < 0.3:
                timed[p] = rng.random() * 0.03
            elif r < 0.6:
                crashes[p] = (rng.randint(1, 40), rng.random() < 0.5)
    damaged = rng.random() < 0.3
    dkinds = tuple(k for k in DAMAGE_KINDS if rng.random() < 0.6) or ("bitflip",)
    return Plan(forked, procs, threads, rng.randint(2, 12), lengths,
                rng.choice((0, 0, 2, 4)), rng.uniform(0.03, 0.2) if kinds else 0.0, kinds,
                timed, crashes, dkinds if damaged else (), rng.randint(1, 3))


@dataclass
class Result:
    fmt: str
    seed: int
    findings: list[str] = field(default_factory=list)
    kills: int = 0
    faults: Counter = field(default_factory=Counter)
    damage: Counter = field(default_factory=Counter)
    acked: int = 0
    seconds: float = 0.0
    variant: str = "plain"
    rounds: int = 1


def _proc_body(fmt: Format, path: str, work: str, plan: Plan, seed: int, p: int,
               lock_path: str | None, maintenance: bool) -> None:
    crash = plan.crash_points.get(p)
    faults = None
    if plan.fault_kinds or crash:
        faults = Faults(seed * 1009 + p, plan.fault_rate, plan.fault_kinds, skip=2,
                        crash_at=crash[0] if crash else None,
                        crash_torn=bool(crash and crash[1]), drop=plan.drop, drop_dir=work)
    jobs = []
    faulty = _faulty(fmt, plan)
    if maintenance:
        jobs.append((maintenance_loop, (fmt, path, work, f"m{p}", seed * 7 + p,
                                        plan.maintenance, faults, 100 + p, lock_path,
                                        faulty)))
    else:
        for t in range(plan.threads):
            jobs.append((writer_loop, (fmt, path, work, f"w{p}-{t}", seed * 31 + p * 7 + t,
                                       plan.ops, plan.lengths, faults, t, lock_path,
                                       faulty)))
    errors: list[str] = []

    def guarded(fn, args):
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - the harness reports, never dies
            errors.append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")

    with faults if faults is not None else nullcontext():
        if len(jobs) == 1:
            guarded(*jobs[0])
        else:
            ts = [threading.Thread(target=guarded, args=job) for job in jobs]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
    if errors:
        with open(os.path.join(work, f"harness-{p}.oracle"), "a") as fh:
            for e in errors:
                fh.write("X harness error: " + e.replace("\n", " | ") + "\n")


def _run_forked(fmt: Format, path: str, work: str, plan: Plan, seed: int,
                lock_path: str | None, result: Result) -> None:
    pids: dict[int, int] = {}
    roles = [(p, False) for p in range(plan.procs)]
    if plan.maintenance:
        roles.append((plan.procs, True))
    for p, maint in roles:
        pid = os.fork()
        if pid == 0:  # the child: run, never return into the harness
            code = 0
            try:
                _proc_body(fmt, path, work, plan, seed, p, lock_path, maint)
            except BaseException:  # noqa: BLE001
                code = 3
            os._exit(code)
        pids[p] = pid
    start = time.monotonic()
    pending = dict(pids)
    kills = sorted((t, p) for p, t in plan.timed_kills.items() if p in pids)
    while pending:
        now = time.monotonic() - start
        while kills and kills[0][0] <= now:
            _, p = kills.pop(0)
            if p in pending:
                try:
                    os.kill(pending[p], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p, pid in list(pending.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                del pending[p]
                if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
                    result.kills += 1
                elif os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
                    result.findings.append(f"writer process {p} exited with "
                                           f"{os.WEXITSTATUS(status)}")
        if pending and now > HANG_SECONDS:
            for p, pid in pending.items():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                result.findings.append(f"hang: process {p} still running after "
                                       f"{HANG_SECONDS:.0f} s")
            break
        if pending:
            time.sleep(0.0005)


def run_scenario(fmt_name: str, seed: int, base_dir: str | None = None,
                 keep: bool = False, fsync_drops: bool = False) -> Result:
    """Run scenario ``seed`` of ``fmt_name``. ``fsync_drops``: some faulty scenarios
    make a failed fsync lose data (``Faults(drop=True)``)."""
    _quiet_logs()
    rng = random.Random(f"{fmt_name}:{seed}")
    plan = make_plan(rng)
    result = Result(fmt_name, seed)
    started = time.monotonic()
    try:
        fmt = load(fmt_name)
    except Exception as exc:  # noqa: BLE001 - a runtime that does not import
        result.findings.append(f"harness: the {fmt_name} runtime does not import: "
                               f"{type(exc).__name__}: {exc}")
        return result
    more = random.Random(f"{fmt_name}:{seed}:more")
    result.variant = fmt.variant(more)
    _draw_drop(plan, more, fsync_drops)
    second = more.random() < SECOND_ROUND
    plan2 = make_plan(more)
    _draw_drop(plan2, more, fsync_drops)
    work = tempfile.mkdtemp(prefix=f"torture-{fmt_name}-{seed}-", dir=base_dir)
    try:
        path = os.path.join(work, fmt.filename)
        fmt.create(path, result.variant)
        lock_path = None if fmt.self_locking else os.path.join(work, "writers.lock")
        first = _round(fmt, path, work, plan, seed, lock_path, rng, result)
        if second and first.repaired and not result.findings:
            result.rounds = 2
            plan2.refusals = first.refused
            _round(fmt, path, os.path.join(work, "round2"), plan2, seed + ROUND2_SEED,
                   lock_path, more, result, first=(plan, first))
    except Exception as exc:  # noqa: BLE001 - the harness reports, never dies
        result.findings.append(f"harness: {type(exc).__name__}: {exc} "
                               f"{traceback.format_exc(limit=3)!r}")
    finally:
        if keep:
            result.findings = [f"{f} [kept {work}]" for f in result.findings]
        else:
            shutil.rmtree(work, ignore_errors=True)
    result.seconds = time.monotonic() - started
    return result


def _draw_drop(plan: Plan, rng: random.Random, enabled: bool) -> None:
    # drawn whether or not enabled, so enabling drops changes no other draw
    plan.drop = rng.random() < FSYNC_DROPS and enabled and bool(plan.fault_kinds)
    if plan.drop and "fsync-eio" not in plan.fault_kinds:
        plan.fault_kinds += ("fsync-eio",)


def _attempted(fmt: Format, plan: Plan) -> tuple[int, int]:
    """Writes and maintenance steps a round attempts, and its most payload bytes."""
    ops = plan.procs * plan.threads * plan.ops
    return ops + plan.maintenance, ops * plan.lengths[1]


def _round(fmt: Format, path: str, work: str, plan: Plan, seed: int, lock_path: str | None,
           rng: random.Random, result: Result,
           first: tuple[Plan, Checked] | None = None) -> Checked:
    """One round: writers and maintenance, damage, the check. ``first`` (the first
    round's plan and check) makes this the second round: the writes the first round's
    writer open showed must survive it too, and the side files the first round left
    excuse nothing lost in this one."""
    os.makedirs(work, exist_ok=True)
    kills = result.kills
    if plan.forked:
        _run_forked(fmt, path, work, plan, seed, lock_path, result)
    elif plan.maintenance:
        _inproc_with_maintenance(fmt, path, work, plan, seed, lock_path)
    else:
        _proc_body(fmt, path, work, plan, seed, 0, lock_path, False)
    log = read_oracles(work)
    drops = read_drops(work)
    label = "" if first is None else "round 2: "
    result.findings += [label + f for f in log.findings]
    result.faults.update(log.faults)
    result.acked += len(log.acks)
    with open(path, "rb") as fh:
        before = fh.read()
    events = []
    if plan.damage:
        events = damage_file(path, rng, plan.damage, plan.damage_events, fmt.protect)
        result.damage.update(d.kind for d in events)
    ops, payload = _attempted(fmt, plan)
    carried: list[Ack] = []
    ignore: frozenset[str] = frozenset()
    if first is not None:
        more_ops, more_payload = _attempted(fmt, first[0])
        ops, payload = ops + more_ops, payload + more_payload
        carried, ignore = first[1].survivors, first[1].sides
    disturbed = bool(result.kills - kills or sum(log.faults.values()))
    checked = check_store(fmt, path, carried + log.acks, before, events, ops=ops,
                          payload_bytes=payload, max_size=len(before), disturbed=disturbed,
                          variant=result.variant, dropped=len(drops), ignore_sides=ignore)
    result.findings += [label + f for f in checked.findings]
    return checked


def _faulty(fmt: Format, plan: Plan) -> bool:
    """Whether a refused write is expected: after injected faults, or after a kill when
    the format's writers refuse a crash's torn tail until an explicit repair."""
    kills = bool(plan.timed_kills or plan.crash_points)
    return bool(plan.fault_kinds) or (kills and fmt.reader_refuses_torn_tail) or plan.refusals


def _quiet_logs() -> None:
    # recovery warnings are expected by the thousand here; the checker judges outcomes
    logger = logging.getLogger("bytewright")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False


def _inproc_with_maintenance(fmt: Format, path: str, work: str, plan: Plan, seed: int,
                             lock_path: str | None) -> None:
    # one process: the writers and the maintenance run as threads under one fault layer
    faults = None
    if plan.fault_kinds:
        faults = Faults(seed * 1009, plan.fault_rate, plan.fault_kinds, skip=2,
                        drop=plan.drop, drop_dir=work)
    faulty = _faulty(fmt, plan)
    errors: list[str] = []

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001
            errors.append(f"{type(exc).__name__}: {exc}")

    jobs = [threading.Thread(target=guarded, args=(
        writer_loop, fmt, path, work, f"w0-{t}", seed * 31 + t, plan.ops, plan.lengths,
        faults, t, lock_path, faulty)) for t in range(plan.threads)]
    jobs.append(threading.Thread(target=guarded, args=(
        maintenance_loop, fmt, path, work, "m0", seed * 7, plan.maintenance, faults, 100,
        lock_path, faulty)))
    with faults if faults is not None else nullcontext():
        for t in jobs:
            t.start()
        for t in jobs:
            t.join()
    if errors:
        with open(os.path.join(work, "harness-0.oracle"), "a") as fh:
            for e in errors:
                fh.write("X harness error: " + e.replace("\n", " | ") + "\n")
