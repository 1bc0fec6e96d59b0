"""How long the command line takes to answer on a tiny file, against the floor of any
Python tool built on the same libraries: ``python -c "import construct, yaml"``.

Each command runs as a whole process, the commands in turn round after round (so that a
change in the machine's speed touches all of them alike); a process's CPU time (user +
system, from the operating system's accounting of the finished child) is the figure,
and each command's ratio to the floor is the median of the per-round ratios. The files
are made by the runtime's own writers: a ZE WAL of one record and an HTT store of one
node.

Three states are measured: ``warm``, with the bytecode caches Python writes on first
import (an installed package has them), the state the target is judged in; ``cold``,
every module compiled from source, the floor's too (``PYTHONPYCACHEPREFIX`` points at an
empty folder); and ``own``, bytewright's own modules compiled on every run while its
dependencies load from their caches (a checkout run with ``PYTHONDONTWRITEBYTECODE=1``).
The generated modules' sizes (lines per family) are reported beside: the cold and own
figures follow them.

``python -m bytewright.bench.startup`` prints the table; ``bytewright bench --baselines``
includes it among its targets.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

FLOOR = "import construct, yaml"
TARGET = 5.0  # each command's CPU time at most this many times the floor's
JUDGED = ("ze_info", "inspect_ze", "inspect_htt", "htt_info")


def small_files(folder: str) -> dict[str, str]:
    """A one-record ZE WAL and a one-node HTT store, written by the runtime's writers."""
    from ..generated import ze
    from ..runtime.htt.store import Store
    from ..runtime.ze import wal

    paths = {"wal": os.path.join(folder, "small.wal"), "htt": os.path.join(folder, "small.htt")}
    body = ze.OpDeleteV1(ze.PayloadV1Header(), [7])
    with open(paths["wal"], "wb") as fh:
        fh.write(wal.wal_bytes(1, [(wal.Op.delete_v1, wal.encode_payload(wal.Op.delete_v1,
                                                                          body))]))
    store = Store.create(paths["htt"])
    store.put("/a", b"x")
    store.close()
    return paths


def _cli() -> list[str]:
    """The ``bytewright`` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("bytewright")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "bytewright"]


def commands(files: dict[str, str]) -> dict[str, list[str]]:
    bw = _cli()
    return {"floor": [sys.executable, "-c", FLOOR],
            "ze_info": [*bw, "ze", "info", files["wal"]],
            "inspect_ze": [*bw, "inspect", files["wal"]],
            "htt_info": [*bw, "htt", "info", files["htt"]],
            "inspect_htt": [*bw, "inspect", files["htt"]]}


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, exit code) of one run of ``cmd`` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          cwd=tempfile.gettempdir(), check=False).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, code


def _rounds(cmds: dict[str, list[str]], env: dict[str, str], rounds: int) -> dict[str, Any]:
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    codes: dict[str, int] = {}
    for _ in range(rounds):
        for name, cmd in cmds.items():
            c, w, code = _run(cmd, env)
            cpu[name].append(c)
            wall[name].append(w)
            codes[name] = code
    out: dict[str, Any] = {}
    for name in cmds:
        ratios = [c / f for c, f in zip(cpu[name], cpu["floor"], strict=True) if f > 0]
        out[name] = {"cpu_s": round(statistics.median(cpu[name]), 4),
                     "wall_s": round(statistics.median(wall[name]), 4),
                     "ratio": round(statistics.median(ratios), 2) if ratios else None,
                     "ratio_range": [round(min(ratios), 2), round(max(ratios), 2)]
                     if ratios else None,
                     "exit": codes[name], "command": " ".join(cmds[name])}
    return out


def generated_lines() -> dict[str, int]:
    """Lines of each generated module of the package's own project."""
    folder = Path(__file__).resolve().parent.parent / "generated"
    return {p.stem: sum(1 for _ in p.open(encoding="utf-8"))
            for p in sorted(folder.glob("*.py")) if p.name != "__init__.py"}


def run(quick: bool = False, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Warm and cold start-up of every command against the floor, and the line counts."""
    say = log or (lambda s: None)
    warm_rounds, cold_rounds = (3, 1) if quick else (7, 2)
    folder = tempfile.mkdtemp(prefix="bw-startup-")
    try:
        cmds = commands(small_files(folder))
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # let the first runs write the caches
        env.pop("PYTHONPYCACHEPREFIX", None)
        for cmd in cmds.values():
            _run(cmd, env)  # warm-up: bytecode caches written, files in the page cache
        say(f"start-up, warm: {warm_rounds} rounds of {len(cmds)} commands ...")
        warm = _rounds(cmds, env, warm_rounds)
        cold_env = dict(env, PYTHONDONTWRITEBYTECODE="1",
                        PYTHONPYCACHEPREFIX=os.path.join(folder, "no-cache"))
        say(f"start-up, cold: {cold_rounds} rounds (every module compiled) ...")
        cold = _rounds(cmds, cold_env, cold_rounds)
        say(f"start-up, own modules compiled: {cold_rounds} rounds ...")
        own = _rounds(cmds, _own_uncached(cmds, env, os.path.join(folder, "cache")),
                      cold_rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"floor": FLOOR, "target": TARGET, "warm": warm, "cold": cold, "own": own,
            "generated_lines": generated_lines()}


def _own_uncached(cmds: dict[str, list[str]], env: dict[str, str], prefix: str) -> dict:
    """An environment whose bytecode caches (under ``prefix``) hold every dependency's
    modules but none of bytewright's own, and that writes none."""
    env = dict(env, PYTHONPYCACHEPREFIX=prefix)
    for cmd in cmds.values():
        _run(cmd, env)  # every module's cache written under the prefix
    root = Path(__file__).resolve().parent.parent  # the package's own folder
    for pyc in Path(prefix, *root.parts[1:]).rglob("*.pyc"):
        if "site-packages" not in pyc.parts:  # a virtualenv inside a checkout stays cached
            pyc.unlink()
    return dict(env, PYTHONDONTWRITEBYTECODE="1")


def check(rep: dict) -> dict:
    """The ``startup`` target's values from a report's ``startup`` section."""
    s = rep.get("startup")
    if not s:
        return {"values": [], "note": "start-up not measured in this run"}
    values = []
    for name in JUDGED:
        w, c, own = s["warm"][name], s["cold"][name], s["own"][name]
        ok = w["ratio"] is not None and w["exit"] == 0
        values.append({"subject": name, "value": w["ratio"], "threshold": TARGET,
                       "unit": "x", "higher_is_better": False,
                       "met": (w["ratio"] <= TARGET) if ok else None,
                       "note": f"{w['cpu_s']:.3f} s CPU against {s['warm']['floor']['cpu_s']:.3f}"
                               f" s (rounds {w['ratio_range'][0]}-{w['ratio_range'][1]}x); "
                               f"cold (no bytecode cache) {c['ratio']}x, own modules "
                               f"compiled {own['ratio']}x"
                               + ("" if w["exit"] == 0 else f"; exit {w['exit']}")})
    lines = ", ".join(f"{k} {v:,}" for k, v in s["generated_lines"].items())
    return {"values": values, "profile_keys": [], "note": f"generated lines: {lines}"}


STATEMENT = ("bytewright ze info / htt info / inspect on a tiny file: <= 5x the CPU time of "
             "`python -c \"import construct, yaml\"`")
HOW = ("bench/startup.py: whole processes in turn, round after round, CPU time from the "
       "OS; median of the per-round ratios; bytecode caches present (cold shown)")


def format_table(s: dict) -> str:
    lines = [f"start-up against `python -c \"{s['floor']}\"` (CPU s, median; ratio = median "
             f"of per-round ratios; target <= {s['target']:g}x)",
             "warm: bytecode caches; cold: none; own: bytewright's own modules compiled, "
             "its dependencies cached",
             f"{'command':<12} {'warm s':>7} {'warm x':>7} {'cold s':>7} {'cold x':>7} "
             f"{'own s':>7} {'own x':>7}  command"]
    for name, w in s["warm"].items():
        c, o = s["cold"][name], s["own"][name]
        lines.append(f"{name:<12} {w['cpu_s']:>7.3f} {w['ratio'] or 0:>7.2f} "
                     f"{c['cpu_s']:>7.3f} {c['ratio'] or 0:>7.2f} "
                     f"{o['cpu_s']:>7.3f} {o['ratio'] or 0:>7.2f}  {w['command']}"
                     + ("" if w["exit"] == 0 else f"  (exit {w['exit']})"))
    lines.append("generated lines: " + ", ".join(
        f"{k} {v:,}" for k, v in s["generated_lines"].items())
        + f" (total {sum(s['generated_lines'].values()):,})")
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run("--quick" in sys.argv,
                           log=lambda m: print(m, file=sys.stderr, flush=True))))
