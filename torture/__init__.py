"""Torture harness for the shipped formats (HTT, Pile, kladde, ZE WAL).

Seeded scenarios run concurrent writers (threads and forked processes) with maintenance
alongside, SIGKILL writers at random points, inject I/O faults through a fault-injecting
file layer (:mod:`.faults`), damage the files between runs (:mod:`.damage`) and hold every
open to an oracle of acknowledged writes (:mod:`.oracle`, :mod:`.check`). Run it with
``python -m bytewright.torture``; docs/torture.md describes it.
"""

from __future__ import annotations

from .runner import Report, run
from .scenario import Result, run_scenario

__all__ = ["Report", "Result", "run", "run_scenario"]
