"""Bounded fuzzing of every generated decoder entry point.

Runs in the normal test suite: hypothesis with a fixed seed (``derandomize``) and a
bounded number of examples per entry point. Nothing here names a format: the entry
points come from each generated module's ``DECODERS`` / ``CONSTRUCT_DECODERS`` tables and
its ``iter_*`` functions, for the package's own project and every example project under
``examples/`` (so a new shipped format or user example is covered when it appears).

Inputs: random bytes; byte-level mutations of the fixtures (flip, set, truncate, insert,
delete, duplicate); and structure-aware mutations that decode a fixture, change one
field of the value and re-encode it with the generated encoder, so checksums stay valid
and the decoder gets past them.

The property, for every input:
* the only exception that escapes is the project's (``BytewrightError``), carrying an
  ``offset`` inside the input (0 <= offset <= len(input));
* the call finishes within ``TIME_BOUND`` seconds (a SIGALRM guard turns a hang into a
  failure instead of a stuck test run);
* the peak allocation (tracemalloc) stays under ``MEMORY_SLACK + MEMORY_FACTOR x len``;
* the fast path and the Construct path (interpreted and compiled) accept and refuse the
  same inputs, with equal values, and refuse with the same error class, field path and
  offset.

The long coverage-guided run is fuzz/run_atheris.py (see fuzz/README.md).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import itertools
import signal
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bytewright.generator import project
from bytewright.review import checks
from bytewright.runtime.errors import BytewrightError, EncodeError

from .conftest import budget, spread

TIME_BOUND = 5.0  # seconds per input (generous: 2 shared cores); a hang trips the alarm
MEMORY_SLACK = 4 << 20  # bytes any decode may use regardless of input size
MEMORY_FACTOR = 64  # ... plus this many times the input size
EXAMPLES = 12  # per fast-path entry point (fast decode + iter in each example)
CONSTRUCT_EXAMPLES = 6  # per Construct entry point (the slow reference path)
# the default run fuzzes every entry point with fewer examples; -m long with the above
FAST_EXAMPLES = 4
FAST_CONSTRUCT_EXAMPLES = 2
FAST_CONSTRUCT_TARGETS = 76  # of the Construct entry points (all of them under -m long)
MAX_PARAM_SETS = 12

REPO = Path(__file__).resolve().parent.parent


# -- discovery --------------------------------------------------------------------------------

@dataclasses.dataclass
class Target:
    """One record of one generated module, with everything needed to fuzz it."""

    label: str
    module: object
    record: str
    params: list[dict]  # candidate keyword-parameter sets
    seeds: list[bytes]
    values: list[tuple[object, dict]]  # decoded seeds + params, for structure-aware mutation


def _projects() -> list[project.Project]:
    found = [project.package_project()]
    for folder in sorted((REPO / "examples").glob("*/")):
        try:
            found.append(project.load(folder))
        except project.ProjectError:
            continue  # a folder without a project file is not an example project
    return found


def _families(proj: project.Project) -> list[str]:
    return sorted(p.stem for p in proj.output.glob("*.py")
                  if not p.name.startswith("_") and p.stem.isidentifier())


def _kw_params(fn) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(fn).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and n != "compiled"}


def _type_candidates(module, param: inspect.Parameter, observed: set) -> list:
    if param.default is not inspect.Parameter.empty:
        return [param.default]
    ann = param.annotation if isinstance(param.annotation, str) else getattr(
        param.annotation, "__name__", "")
    kind = getattr(module, ann, None)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return sorted({*observed, *(m.value for m in kind)}, key=repr)
    if ann == "bool":
        return [False, True]
    if observed:
        return sorted(observed, key=repr)
    return [0, 1, 2, 4, 17, 20]


def _param_sets(module, record: str, fixtures: list[checks.Fixture]) -> list[dict]:
    fn = module.DECODERS[record]
    kw = _kw_params(fn)
    sets = [dict(f.params) for f in fixtures if f.record == record]
    observed: dict[str, set] = {}
    for f in fixtures:
        for k, v in f.params.items():
            if isinstance(v, (int, bool, str)):
                observed.setdefault(k, set()).add(v)
    cands = [_type_candidates(module, kw[n], observed.get(n, set())) for n in kw]
    for combo in itertools.islice(itertools.product(*cands), MAX_PARAM_SETS * 4):
        d = dict(zip(kw, combo, strict=True))
        if d not in sets:
            sets.append(d)
    out = []
    for d in sets:
        d = {k: v for k, v in d.items() if k in kw}
        if d not in out:
            out.append(d)
    return out[:MAX_PARAM_SETS] or [{}]


def _walk(value):
    """Every dataclass instance inside a decoded value (itself included)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            yield v
            stack.extend(getattr(v, f.name) for f in dataclasses.fields(v))
        elif isinstance(v, (list, tuple)):
            stack.extend(v)


def _targets() -> list[Target]:
    targets: list[Target] = []
    for proj in _projects():
        fixture_dir = proj.fixtures
        for family in _families(proj):
            module = proj.load_module(family)
            decoders = getattr(module, "DECODERS", None)
            if not decoders:
                continue
            fxs = [f for f in (checks.fixtures(family, fixture_dir) if fixture_dir else [])
                   if f.record in decoders]
            by_class = {cls: name for name, cls in getattr(module, "RECORDS", {}).items()}
            per_record: dict[str, list[bytes]] = {}
            values: dict[str, list[tuple[object, dict]]] = {}
            params = {r: _param_sets(module, r, fxs) for r in decoders}
            for f in fxs:
                per_record.setdefault(f.record, []).append(f.data)
                try:
                    value, _ = decoders[f.record](f.data, **f.params)
                except BytewrightError:
                    continue
                values.setdefault(f.record, []).append((value, f.params))
                # nested records become seeds of their own record (re-encoded)
                for inner in _walk(value):
                    name = by_class.get(type(inner))
                    if name is None or name == f.record or len(per_record.get(name, [])) > 8:
                        continue
                    for ps in params[name]:
                        try:
                            data = module.ENCODERS[name](inner, **ps)
                            module.DECODERS[name](data, **ps)
                        except (BytewrightError, TypeError, ValueError, AttributeError):
                            continue
                        per_record.setdefault(name, []).append(data)
                        values.setdefault(name, []).append((inner, ps))
                        break
            every = [f.data for f in fxs]
            for record in decoders:
                seeds = per_record.get(record, []) or every[:4]
                label = f"{proj.name.split()[0]}:{family}.{record}" if not proj.is_package \
                    else f"{family}.{record}"
                targets.append(Target(label, module, record, params[record], seeds,
                                      values.get(record, [])))
    return targets


TARGETS = _targets()


# -- inputs -----------------------------------------------------------------------------------

_INTS = (0, 1, 2, 3, 7, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0xFFFFFFFF,
         1 << 32, (1 << 64) - 1)


def _slots(value, path=()):
    """(path, leaf) for every mutable leaf of a decoded value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _slots(getattr(value, f.name), (*path, f.name))
    elif isinstance(value, list):
        yield path, value
        for i, v in enumerate(value[:8]):
            yield from _slots(v, (*path, i))
    else:
        yield path, value


def _set(root, path, new):
    obj = root
    for step in path[:-1]:
        obj = obj[step] if isinstance(step, int) else getattr(obj, step)
    last = path[-1]
    if isinstance(last, int):
        obj[last] = new
    else:
        object.__setattr__(obj, last, new)


@st.composite
def _mutated_value(draw, value):
    value = copy.deepcopy(value)
    slots = [(p, v) for p, v in _slots(value) if p]
    if not slots:
        return value
    path, leaf = draw(st.sampled_from(slots))
    if isinstance(leaf, bool):
        new = not leaf
    elif isinstance(leaf, enum.Enum):
        new = draw(st.sampled_from(list(type(leaf))))
    elif isinstance(leaf, int):
        new = draw(st.sampled_from((*_INTS, leaf + 1, max(leaf - 1, 0))))
    elif isinstance(leaf, float):
        new = draw(st.sampled_from((0.0, -1.0, float("nan"), float("inf"), 1e308)))
    elif isinstance(leaf, (bytes, bytearray)):
        new = draw(st.sampled_from((b"", bytes(leaf) * 2, bytes(leaf)[:-1],
                                    bytes(leaf) + b"\x00", bytes(b ^ 0xFF for b in leaf))))
    elif isinstance(leaf, str):
        new = draw(st.sampled_from(("", leaf * 2, leaf[:-1], leaf + "\u00e9", "/")))
    elif isinstance(leaf, list):
        if leaf and draw(st.booleans()):
            new = leaf[:-1]
        else:
            new = leaf + leaf[:1] if leaf else []
    else:
        return value
    try:
        _set(value, path, new)
    except (AttributeError, TypeError, IndexError):
        pass
    return value


@st.composite
def _byte_mutation(draw, seed: bytes) -> bytes:
    buf = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 5))
        n = len(buf)
        at = draw(st.integers(0, max(n - 1, 0)))
        if op == 0 and n:
            buf[at] ^= 1 << draw(st.integers(0, 7))
        elif op == 1 and n:
            buf[at] = draw(st.sampled_from((0, 1, 0x7F, 0x80, 0xFF)))
        elif op == 2:
            del buf[at:]
        elif op == 3:
            buf[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == 4 and n:
            del buf[at:at + draw(st.integers(1, 16))]
        elif op == 5 and n:
            buf[at:at] = buf[at:at + draw(st.integers(1, 32))]
    return bytes(buf)


@st.composite
def _input(draw, target: Target):
    params = draw(st.sampled_from(target.params))
    kind = draw(st.integers(0, 3))
    if kind == 0 or not target.seeds:
        return draw(st.binary(max_size=200)), params
    if kind == 3 and target.values:
        value, vparams = draw(st.sampled_from(target.values))
        mutated = draw(_mutated_value(value))
        try:
            return target.module.ENCODERS[target.record](mutated, **vparams), vparams
        except (EncodeError, TypeError, ValueError, AttributeError, OverflowError):
            pass  # the encoder refused the value: fall through to a byte mutation
    seed = draw(st.sampled_from(target.seeds))
    if kind == 1:
        return seed[: draw(st.integers(0, len(seed)))], params
    return draw(_byte_mutation(seed)), params


# -- the property -----------------------------------------------------------------------------

class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no result after {TIME_BOUND} s")


def _consume(result) -> None:
    if inspect.isgenerator(result):
        for _ in result:
            pass


def check_input(fn, buf: bytes, params: dict, *, need_offset: bool = True) -> None:
    """Run one decoder call under the property; raises AssertionError on a violation.
    Both paths are held to an offset inside the input; ``need_offset=False`` checks the
    error type, time and memory only."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_BOUND)
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    try:
        _consume(fn(buf, **params))
    except BytewrightError as exc:
        off = getattr(exc, "offset", None)
        assert not need_offset or (off is not None and 0 <= off <= len(buf)), (
            f"{type(exc).__name__} with offset {off} outside the {len(buf)}-byte input: {exc}")
    except _Hang:
        raise AssertionError(f"hang: {fn.__name__} did not finish in {TIME_BOUND} s") from None
    except Exception as exc:  # the property: nothing else may escape
        raise AssertionError(f"{fn.__name__} let {type(exc).__name__} escape: {exc}") from exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    assert elapsed < TIME_BOUND, f"{fn.__name__} took {elapsed:.2f} s"
    budget = MEMORY_SLACK + MEMORY_FACTOR * len(buf)
    assert peak <= budget, f"{fn.__name__} allocated {peak} bytes for {len(buf)} input bytes"


@pytest.fixture
def traced():
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


_FUZZ = settings(derandomize=True, deadline=None, database=None, max_examples=EXAMPLES,
                 suppress_health_check=list(HealthCheck))


def test_every_generated_module_was_found():
    labels = {t.label.split(".")[0] for t in TARGETS}
    assert {"htt", "ze", "kladde"} <= labels  # and whatever else ships (pile, examples)
    assert all(t.params for t in TARGETS)


@pytest.mark.parametrize("examples", budget(EXAMPLES, FAST_EXAMPLES))
@pytest.mark.parametrize("target", TARGETS, ids=[t.label for t in TARGETS])
def test_fast_path_decoders_raise_only_project_errors(target, examples, traced):
    decode = target.module.DECODERS[target.record]
    iterate = getattr(target.module, f"iter_{target.record}", None)

    @settings(_FUZZ, max_examples=examples)
    @given(_input(target))
    def prop(case):
        buf, params = case
        check_input(decode, buf, params)
        if iterate is not None:
            check_input(iterate, buf, params)

    prop()


CONSTRUCT_TARGETS = [t for t in TARGETS if t.record in getattr(t.module, "CONSTRUCT_DECODERS",
                                                               {})]


def _outcome(fn, buf: bytes, params: dict):
    """(True, value) or (False, (error class, field path, offset))."""
    try:
        value = fn(buf, **params)
    except BytewrightError as exc:
        return False, (type(exc).__name__, getattr(exc, "path", ""), getattr(exc, "offset", None))
    return True, value[0] if isinstance(value, tuple) else value


def _same_value(a, b) -> bool:
    # NaN != NaN: fall back to the text form, which shows every field (and NaN as nan)
    return a == b or repr(a) == repr(b)


def _construct_params() -> list:
    """Every Construct entry point with the full budget under -m long; by default a spread
    third of them (every format) with the small one: most of this test's time is building
    the compiled parser of each record, which the property tests do for every record."""
    # spread() leaves the cases it keeps for the default run as they are
    fast = {id(c) for c in spread(CONSTRUCT_TARGETS, FAST_CONSTRUCT_TARGETS)
            if isinstance(c, Target)}
    out = []
    for t in CONSTRUCT_TARGETS:
        if id(t) in fast:
            out.append(pytest.param(t, FAST_CONSTRUCT_EXAMPLES,
                                    id=f"{t.label}-n{FAST_CONSTRUCT_EXAMPLES}"))
        out.append(pytest.param(t, CONSTRUCT_EXAMPLES, id=f"{t.label}-long{CONSTRUCT_EXAMPLES}",
                                marks=pytest.mark.long))
    return out


@pytest.mark.parametrize(("target", "examples"), _construct_params())
def test_construct_path_decoders_raise_only_project_errors_and_agree(target, examples, traced):
    """The Construct path is held to the same property, and both paths are strict in the
    same way: each input is accepted by both (with equal values) or refused by both."""
    decode = target.module.CONSTRUCT_DECODERS[target.record]
    fast = target.module.DECODERS[target.record]

    @settings(_FUZZ, max_examples=examples)
    @given(_input(target))
    def prop(case):
        buf, params = case
        check_input(decode, buf, params)
        ok_fast, v_fast = _outcome(fast, buf, params)
        ok_con, v_con = _outcome(decode, buf, params)
        assert ok_fast == ok_con, (
            f"paths disagree on {buf.hex()} {params}: fast "
            f"{'accepts' if ok_fast else f'refuses {v_fast}'}, Construct "
            f"{'accepts' if ok_con else f'refuses {v_con}'}")
        if ok_fast:
            assert _same_value(v_fast, v_con), f"values differ on {buf.hex()} {params}"
        else:  # the same error: class, field path (list indices included) and offset
            assert v_fast == v_con, f"errors differ on {buf.hex()} {params}: fast {v_fast}, " \
                f"Construct {v_con}"
        # the compiled Construct parser too: same verdict, value and error
        ok_cmp, v_cmp = _outcome(lambda b, **p: decode(b, compiled=True, **p), buf, params)
        assert ok_cmp == ok_con, f"compiled and interpreted disagree on {buf.hex()} {params}"
        assert _same_value(v_cmp, v_con) if ok_con else v_cmp == v_con, (
            f"compiled and interpreted differ on {buf.hex()} {params}: {v_cmp} != {v_con}")

    prop()


# -- the harness itself is honest ----------------------------------------------------------

def test_the_property_catches_an_escape_a_hang_and_a_bad_offset(traced):
    from bytewright.runtime.errors import DecodeError

    def escapes(buf):
        raise IndexError("boom")

    def bad_offset(buf):
        raise DecodeError("x", offset=len(buf) + 5)

    def no_offset(buf):
        raise DecodeError("x")

    def greedy(buf):
        return bytearray(MEMORY_SLACK + MEMORY_FACTOR * len(buf) + 1)

    for fn in (escapes, bad_offset, no_offset, greedy):
        with pytest.raises(AssertionError):
            check_input(fn, b"abc", {})
    check_input(lambda buf: (_ for _ in range(3)), b"abc", {})  # a clean generator passes


def test_structure_aware_mutations_keep_checksums_valid():
    """Re-encoded mutants must get past the checksum: most of them decode."""
    import random

    target = next(t for t in TARGETS if t.values and t.label.endswith(".wal_entry"))
    value, params = next((v, p) for v, p in target.values
                         if any(isinstance(leaf, bytes) and path for path, leaf in _slots(v)))
    enc = target.module.ENCODERS[target.record]
    dec = target.module.DECODERS[target.record]
    rng = random.Random(7)
    decoded = 0
    for _ in range(50):
        v = copy.deepcopy(value)
        slots = [(p, leaf) for p, leaf in _slots(v) if p and isinstance(leaf, bytes)]
        if not slots:
            break
        path, leaf = rng.choice(slots)
        _set(v, path, leaf + bytes([rng.randrange(256)]))
        dec(enc(v, **params), **params)  # raises if the CRC were not recomputed
        decoded += 1
    assert decoded == 50
