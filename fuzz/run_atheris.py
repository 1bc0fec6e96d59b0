"""Long coverage-guided fuzzing of one format's generated decoders with atheris.

    python fuzz/run_atheris.py FAMILY [libFuzzer flags...]
    python fuzz/run_atheris.py htt -atheris_runs=100000 fuzz/corpus/htt

FAMILY is a generated module of the package's project or of an example project
(``htt``, ``ze``, ``kladde``, ``pile``, ...; ``--list`` prints them). Each input's first
two bytes pick the record and the parameter set; the rest is the buffer handed to the
record's ``decode_*``, ``iter_*`` and ``construct_decode_*`` functions. The property is
the one tests/test_fuzz.py checks in the normal run (only ``BytewrightError`` with an
offset inside the input escapes; a per-input time bound), minus tracemalloc by default
(``BYTEWRIGHT_FUZZ_MEMORY=1`` turns it on; it costs about 3x). The fixtures seed the
corpus. See fuzz/README.md.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _harness():
    """tests/test_fuzz.py holds the discovery and the property (one definition)."""
    spec = importlib.util.spec_from_file_location("_bytewright_fuzz_harness",
                                                  REPO / "tests" / "test_fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    import atheris  # only this script needs it: `pip install atheris`

    with atheris.instrument_imports(include=["bytewright"]):
        harness = _harness()
    if not argv or argv[0].startswith("-"):
        families = sorted({t.label.rsplit(".", 1)[0] for t in harness.TARGETS})
        print("usage: run_atheris.py FAMILY [libFuzzer flags]; families:", *families)
        return 2
    family, flags = argv[0], argv[1:]
    targets = [t for t in harness.TARGETS if t.label.rsplit(".", 1)[0] == family]
    if not targets:
        print(f"no generated decoders for family {family!r}", file=sys.stderr)
        return 2
    memory = os.environ.get("BYTEWRIGHT_FUZZ_MEMORY") == "1"
    if memory:
        tracemalloc.start()
    else:  # the harness calls reset_peak/get_traced_memory: give it a cheap stand-in
        harness.tracemalloc = _NoTrace()
    calls = []
    for t in targets:
        mod = t.module
        fns = [(mod.DECODERS[t.record], True)]
        it = getattr(mod, f"iter_{t.record}", None)
        if it is not None:
            fns.append((it, True))
        cd = getattr(mod, "CONSTRUCT_DECODERS", {}).get(t.record)
        if cd is not None:
            fns.append((cd, True))  # offsets in the input on this path too
        calls.append((t, fns))
    # seed corpus: every fixture seed, prefixed with its record and parameter index
    corpus = [f for f in flags if not f.startswith("-")]
    if not corpus:
        seed_dir = Path(tempfile.mkdtemp(prefix=f"bytewright-fuzz-{family}-"))
        for i, (t, _) in enumerate(calls):
            for j, seed in enumerate(t.seeds):
                (seed_dir / f"{t.record}-{j}").write_bytes(bytes([i % 256, 0]) + seed)
        flags = [*flags, str(seed_dir)]
    else:
        for d in corpus:
            os.makedirs(d, exist_ok=True)
            for i, (t, _) in enumerate(calls):
                for j, seed in enumerate(t.seeds):
                    p = Path(d) / f"seed-{t.record}-{j}"
                    if not p.exists():
                        p.write_bytes(bytes([i % 256, 0]) + seed)

    def one_input(data: bytes) -> None:
        if len(data) < 2:
            return
        t, fns = calls[data[0] % len(calls)]
        params = t.params[data[1] % len(t.params)]
        buf = data[2:]
        for fn, need_offset in fns:
            harness.check_input(fn, buf, params, need_offset=need_offset)

    atheris.Setup([sys.argv[0], *flags], one_input)
    atheris.Fuzz()
    return 0


class _NoTrace:
    """tracemalloc's three calls the harness makes, as no-ops (memory check off)."""

    @staticmethod
    def reset_peak() -> None:
        pass

    @staticmethod
    def get_traced_memory() -> tuple[int, int]:
        return 0, 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
