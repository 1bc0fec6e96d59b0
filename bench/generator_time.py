"""How long the generator and the layout readers take on the shipped schemas: one
``bytewright generate SCHEMA -o TMP`` per schema and one ``bytewright doc`` over all of
them, each a whole process (start-up included), repeated; the figure is the median wall
time on an otherwise idle machine (the report's load averages say whether it was).

``python -m bytewright.bench.generator_time`` prints the table; ``bytewright bench
--baselines`` includes it among its targets.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .startup import _cli

GENERATE_TARGET = 2.0  # seconds per shipped schema
DOC_TARGET = 5.0  # seconds for the docs of every shipped schema
SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def _wall(cmd: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          check=False).returncode
    return time.perf_counter() - t0, code


def run(quick: bool = False, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Median wall seconds of generating each shipped schema and of ``doc`` over all."""
    say = log or (lambda s: None)
    rounds = 2 if quick else 3
    bw = _cli()
    folder = tempfile.mkdtemp(prefix="bw-generate-")
    cmds = {p.stem: [*bw, "generate", str(p), "-o", str(Path(folder, p.stem))]
            for p in sorted(SCHEMAS.glob("*.yaml"))}
    cmds["doc"] = [*bw, "doc", str(SCHEMAS), "--out", str(Path(folder, "site"))]
    say(f"generator and doc: {rounds} rounds of {len(cmds)} commands ...")
    times: dict[str, list[float]] = {k: [] for k in cmds}
    codes: dict[str, int] = {}
    try:
        for _ in range(rounds):
            for name, cmd in cmds.items():
                seconds, codes[name] = _wall(cmd)
                times[name].append(seconds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {name: {"wall_s": round(statistics.median(t), 3),
                   "range": [round(min(t), 3), round(max(t), 3)], "exit": codes[name],
                   "command": " ".join(cmds[name][1:])}
            for name, t in times.items()}


def check(rep: dict) -> dict:
    """The ``generator_time`` target's values from a report's ``generator_time`` section."""
    s = rep.get("generator_time")
    if not s:
        return {"values": [], "note": "generator time not measured in this run"}
    values = []
    for name, r in s.items():
        limit = DOC_TARGET if name == "doc" else GENERATE_TARGET
        ok = r["exit"] == 0
        values.append({"subject": name, "value": r["wall_s"], "threshold": limit,
                       "unit": "s", "higher_is_better": False,
                       "met": r["wall_s"] <= limit if ok else None,
                       "note": f"rounds {r['range'][0]}-{r['range'][1]} s"
                               + ("" if ok else f"; exit {r['exit']}")})
    return {"values": values, "profile_keys": []}


STATEMENT = ("bytewright generate of each shipped schema <= 2 s; bytewright doc of all of "
             "them <= 5 s")
HOW = ("bench/generator_time.py: whole processes (start-up included), median wall time of "
       "a few rounds")


def format_table(s: dict) -> str:
    lines = [f"{'command':<8} {'wall s':>7}  range"]
    for name, r in s.items():
        lines.append(f"{name:<8} {r['wall_s']:>7.2f}  {r['range'][0]:.2f}-{r['range'][1]:.2f}"
                     + ("" if r["exit"] == 0 else f"  (exit {r['exit']})"))
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run("--quick" in sys.argv,
                           log=lambda m: print(m, file=sys.stderr, flush=True))))
