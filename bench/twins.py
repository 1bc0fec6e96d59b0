"""What the one-loop twins and sub-record inlining buy, record by record, and what they cost.

The generator gives a record one-loop twins (``_m_`` for ``decode_many_``/
``decode_prefix_``, ``_em_`` for ``encode_many_``) only where records of its kind are
read in runs (``generator/fast/bulk.py``), and inlines a sub-record's body at its call
sites when the body is small. This benchmark checks both choices on every record of the
shipped schemas, with values drawn from the schemas (``bytewright.properties``; needs the
test extra), a run of up to 2,000 records per record kind:

- **kept twins**: for the records read in runs, the module as generated: ``_m_`` against
  a loop calling the single-record twin ``_u_`` and against the checked loop, ``_em_``
  against the loop calling the encoder;
- **dropped twins**: for the other records, a module generated with every twin
  (``render(all_twins=True)``): what their twins would give if they were read in runs,
  against what their lines cost: each variant's lines and the time to compile and run
  the module's source (what a first import pays; a cached import pays the unmarshalling,
  about a tenth of it);
- **inlining**: a module generated with no sub-record inlined (every callee a call)
  against the module as generated, on the runs' ``decode_many_``/``encode_many_``.

Each time is the best of 5 runs; a gain is the other loop's time over the twin's.
``python -m bytewright.bench.twins [--family F] [--report FILE]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..generator import pipeline
from ..generator import project as project_mod
from ..generator.emit_fast import FastEmitter
from ..generator.fast import bulk
from ..runtime.fastpath import decode_many as _decode_many
from ..runtime.fastpath import encode_many as _encode_many

ROOT = Path(__file__).resolve().parents[1]
RUN_BYTES = 200_000
RUN_RECORDS = 2_000
DRAWS = 12
INLINE_SWEEP = (0, 20, 40, 80, 160)


def _best(fn: Callable[[], Any], reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _loop_over_u(u: Callable, d: Callable, name: str, mv: Any, pos: int, end: int,
                 params: tuple) -> list:
    """``decode_many`` as a loop calling the single-record twin: what ``_m_`` replaces."""
    out: list = []
    append = out.append
    start = pos
    try:
        while pos < end:
            start = pos
            value, pos = u(mv, pos, end, *params)
            append(value)
    except Exception:
        return _decode_many(d, name, mv, start, end, params, out)
    return out


@contextlib.contextmanager
def _inline_limit(lines: int) -> Iterator[None]:
    """The emitter's size limit for an inlined callee body set to ``lines`` (0: every
    sub-record a call)."""
    saved = FastEmitter.INLINE_MAX_LINES
    FastEmitter.INLINE_MAX_LINES = lines
    try:
        yield
    finally:
        FastEmitter.INLINE_MAX_LINES = saved


def _load(text: str, name: str, folder: str) -> tuple[Any, float]:
    """The module of ``text``, and the seconds compiling and running its source took."""
    path = Path(folder) / f"{name}.py"
    path.write_text(text)
    t = time.perf_counter()
    code = compile(text, str(path), "exec")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(code, module.__dict__)  # noqa: S102 (the generator's own output)
    return module, time.perf_counter() - t


def _runs(builder: Any, record: str) -> tuple[bytes, dict, tuple] | None:
    """A run of ``record``'s drawn values as bytes, with its params (by keyword and in
    the generated functions' order); None when nothing could be drawn."""
    from hypothesis import HealthCheck, given, settings

    cases: list = []

    @settings(max_examples=DRAWS, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(builder.case_strategy(record))
    def collect(case: Any) -> None:
        cases.append(case)

    try:
        collect()
    except Exception:  # noqa: BLE001 (a record the strategies cannot draw for)
        return None
    if not cases:
        return None
    mod = builder.module
    params = cases[0].params
    cases = [c for c in cases if c.params == params]
    encode = getattr(mod, f"encode_{record}")
    try:
        blobs = [encode(c.value, **params) for c in cases]
    except Exception:  # noqa: BLE001
        return None
    size = max(1, sum(map(len, blobs)) // len(blobs))
    n = max(1, min(RUN_RECORDS, RUN_BYTES // size))
    data = b"".join((blobs * (n // len(blobs) + 1))[:n])
    order = list(inspect.signature(getattr(mod, f"decode_many_{record}")).parameters)[3:]
    return data, params, tuple(params.get(k) for k in order)


def _gains(m: Any, record: str, data: bytes, kw: dict, pos_params: tuple) -> dict[str, float]:
    """The twins' gains on ``data`` in module ``m`` (those it has)."""
    out: dict[str, float] = {}
    try:
        values = getattr(m, f"decode_many_{record}")(data, **kw)
    except Exception:  # noqa: BLE001 (a run that does not read back: not measured)
        return out
    d, u = getattr(m, f"_d_{record}"), getattr(m, f"_u_{record}", None)
    many, enc_many = getattr(m, f"_m_{record}", None), getattr(m, f"_em_{record}", None)
    end = len(data)
    checked = _best(lambda: _decode_many(d, record, data, 0, end, pos_params))
    if many is not None and u is not None:
        t_m = _best(lambda: many(data, 0, end, *pos_params))
        out["m_vs_u_loop"] = _best(lambda: _loop_over_u(u, d, record, data, 0, end,
                                                        pos_params)) / t_m
        out["m_vs_checked"] = checked / t_m
    if enc_many is not None:
        e = getattr(m, f"_e_{record}")
        with contextlib.suppress(Exception):
            if enc_many(values, *pos_params) == _encode_many(e, record, values, pos_params):
                out["em_vs_e_loop"] = _best(lambda: _encode_many(e, record, values, pos_params)) \
                    / _best(lambda: enc_many(values, *pos_params))
    return out


def _public(m: Any, record: str, data: bytes, kw: dict) -> tuple[float, float] | None:
    """Seconds of ``decode_many_``/``encode_many_`` on ``data`` in module ``m``."""
    dm, em = getattr(m, f"decode_many_{record}"), getattr(m, f"encode_many_{record}")
    try:
        values = dm(data, **kw)
        em(values, **kw)
    except Exception:  # noqa: BLE001
        return None
    return _best(lambda: dm(data, **kw)), _best(lambda: em(values, **kw))


def _spread(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"median {statistics.median(xs):.2f}x, {min(xs):.2f}-{max(xs):.2f}x over {len(xs)}"


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def family_report(builder: Any, folder: str, each: bool = False) -> list[str]:
    """The lines of the report for one family (``each``: also print every record's)."""
    from ..properties import Builder

    fam = builder.family
    shipped = builder.module
    runs = bulk.read_in_runs(fam)
    limit = FastEmitter.INLINE_MAX_LINES
    texts = {"as generated": pipeline.render(fam),
             "every twin": pipeline.render(fam, all_twins=True)}
    for n in INLINE_SWEEP:
        if n != limit:
            with _inline_limit(n):
                texts[f"inline <= {n}"] = pipeline.render(fam)
    mods: dict[str, Any] = {}
    costs: dict[str, float] = {}
    for tag, text in texts.items():
        name = f"_bw_twins_{fam.name}_{''.join(c if c.isalnum() else '_' for c in tag)}"
        mods[tag], costs[tag] = _load(text, name, folder)
    lines = [f"{fam.name}: {len(fam.records)} records, {len(runs)} read in runs"]
    kept: dict[str, list[float]] = {"m_vs_u_loop": [], "m_vs_checked": [], "em_vs_e_loop": []}
    dropped: dict[str, list[float]] = {"m_vs_checked": [], "em_vs_e_loop": []}
    sweep: dict[str, list[tuple[float, float]]] = {t: [] for t in texts if t != "every twin"}
    every = Builder(fam, mods["every twin"])
    for record in fam.records:
        if record in runs:
            got = _runs(builder, record)
            if got is None:
                continue
            data, kw, pos = got
            g = _gains(shipped, record, data, kw, pos)
            for k, v in g.items():
                kept[k].append(v)
            times = {t: _public(mods[t], record, data, kw) for t in sweep}
            if all(times.values()):
                for t in sweep:
                    sweep[t].append(times[t])
            if each:
                print("   ", record, len(data), {k: round(v, 2) for k, v in g.items()},
                      {t: f"{v[0] * 1e3:.2f}/{v[1] * 1e3:.2f} ms" for t, v in times.items() if v})
        else:
            got = _runs(every, record)
            if got is None:
                continue
            data, kw, pos = got
            for k, v in _gains(mods["every twin"], record, data, kw, pos).items():
                if k in dropped:
                    dropped[k].append(v)
    lines.append("  kept twins (records read in runs):")
    lines += [f"    {k:<14} {_spread(v)}" for k, v in kept.items()]
    lines.append("  dropped twins (other records; gain if they were read in runs):")
    lines += [f"    {k:<14} {_spread(v)}" for k, v in dropped.items()]
    lines.append(f"  modules (inlined callee bodies up to {limit} lines as generated; gain = "
                 "geometric mean over the runs' decode_many_/encode_many_ against no inlining):")
    base = sweep.get("inline <= 0") or []
    for tag, text in sorted(texts.items(), key=lambda kv: kv[1].count("\n")):
        row = f"    {tag:<14} {text.count(chr(10)):>7,} lines, compile+run {costs[tag] * 1e3:6.1f} ms"
        if tag in sweep and base and len(sweep[tag]) == len(base):
            dec = _geomean([b[0] / t[0] for b, t in zip(base, sweep[tag], strict=True)])
            enc = _geomean([b[1] / t[1] for b, t in zip(base, sweep[tag], strict=True)])
            row += f"; decode {dec:.3f}x, encode {enc:.3f}x"
        lines.append(row)
    return lines


VARIANTS = {"as generated": (None, False), "every twin": (None, True),
            "inline <= 0": (0, False), "inline <= 40": (40, False), "inline <= 80": (80, False)}


def _install_variant(tag: str, folder: str) -> dict[str, int]:
    """Every shipped family's module generated as variant ``tag`` (``VARIANTS``) and put
    in place of ``bytewright.generated.<family>``, before anything imports it; their
    line counts."""
    import bytewright.generated as package

    limit, every = VARIANTS[tag]
    proj = project_mod.load(ROOT / "bytewright.toml")
    result = pipeline.run(proj.schema_files(), base=proj.root)
    lines = {}
    for name, fam in sorted(result.families.items()):
        with _inline_limit(FastEmitter.INLINE_MAX_LINES if limit is None else limit):
            text = pipeline.render(fam, all_twins=every)
        module, _ = _load(text, f"bytewright.generated.{name}", folder)
        setattr(package, name, module)
        lines[name] = text.count("\n")
    return lines


def _variant_cases(tag: str, quick: bool) -> dict:
    """The harness's cases (bench/harness.py) on variant ``tag``: decode and encode
    ratios against the hand-written codecs, in this process."""
    with tempfile.TemporaryDirectory() as folder:
        lines = _install_variant(tag, folder)
        from . import harness

        rep = harness.run(quick=quick)
    return {"lines": lines, "cases": {
        case: {"decode": r.get("decode_ratio_vs_hand", {}).get("fast"),
               "encode": r.get("encode_ratio_vs_hand", {}).get("fast")}
        for case, r in rep["cases"].items()}}


def cases_report(quick: bool) -> list[str]:
    """Each variant's harness ratios, each in a fresh process, side by side."""
    import json
    import subprocess

    got = {}
    for tag in VARIANTS:
        print(f"  harness on {tag} ...", file=sys.stderr, flush=True)
        out = subprocess.run([sys.executable, "-m", "bytewright.bench.twins", "--variant", tag]
                             + (["--quick"] if quick else []), capture_output=True, text=True,
                             check=True).stdout
        got[tag] = json.loads(out.strip().splitlines()[-1])
    cases = list(next(iter(got.values()))["cases"])
    lines = ["The harness's cases (decode / encode against hand) on each variant, each in a "
             "fresh process" + (" (--quick sizes)" if quick else "") + ":",
             f"  {'variant':<14} {'lines':>8}  " + "  ".join(f"{c:>20}" for c in cases)]
    for tag, r in got.items():
        cells = "  ".join(f"{r['cases'][c]['decode']:>9.2f}/{r['cases'][c]['encode']:<10.2f}"
                          for c in cases)
        lines.append(f"  {tag:<14} {sum(r['lines'].values()):>8,}  {cells}")
    return lines


def main(argv: list[str] | None = None) -> int:
    from ..properties import project_builders

    ap = argparse.ArgumentParser(prog="python -m bytewright.bench.twins", description=__doc__
                                 .split("\n\n")[0])
    ap.add_argument("--family", action="append", help="only this family (repeatable)")
    ap.add_argument("--report", help="also write the report to this file")
    ap.add_argument("--each", action="store_true", help="print each record's gains")
    ap.add_argument("--cases", action="store_true",
                    help="also the harness's cases (bench/harness.py) on each variant")
    ap.add_argument("--quick", action="store_true", help="with --cases: the harness's small sizes")
    ap.add_argument("--no-records", action="store_true", help="skip the record-by-record part")
    ap.add_argument("--variant", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.variant:  # one variant's harness run, in a process of its own (see cases_report)
        import json

        print(json.dumps(_variant_cases(args.variant, args.quick)))
        return 0
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    out = [f"One-loop twins and inlining (python -m bytewright.bench.twins, started {started})",
           "gain = the other loop's time / the twin's (best of 5); m = _m_ (decode_many_), "
           "em = _em_ (encode_many_), u_loop = a loop calling _u_, checked = the loop over "
           "_d_, e_loop = the loop over _e_", ""]
    print("\n".join(out), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for builder in project_builders(project_mod.load(ROOT / "bytewright.toml")):
            if args.no_records or (args.family and builder.family.name not in args.family):
                continue
            lines = family_report(builder, folder, args.each)
            print("\n".join(lines), flush=True)
            out += lines
    if args.cases:
        lines = cases_report(args.quick)
        print("\n".join(lines), flush=True)
        out += [""] + lines
    out.append(f"\n{time.perf_counter() - t0:.0f} s wall")
    print(out[-1].strip())
    if args.report:
        Path(args.report).write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
