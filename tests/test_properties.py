"""The codec-truth property on every record of every schema in the repository.

Valid values drawn from the schema IR (bytewright.properties.strategies) must encode to
the same bytes on the fast and the Construct path and decode back to the value on the
fast path and the interpreted and compiled Construct paths; one invalid change to a value
must make both encoders raise ``EncodeError`` with the same field path. Records the
strategies cannot draw for are listed in UNSUPPORTED with the reason; known codec defects
are strict xfails naming the defect, so a fix turns them into failures to remove.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import pytest

from bytewright.generator import pipeline
from bytewright.generator import project as project_mod
from bytewright.properties import Builder, project_builders, run_record

from .conftest import budget

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = [ROOT / "bytewright.toml", *sorted(ROOT.glob("examples/*/bytewright.toml"))]
VALID_EXAMPLES = 5
NEAR_EXAMPLES = 3
LONG_EXAMPLES = 100

# Records no valid value is drawn for yet, with a fragment of the reason reported (none:
# every record of every schema gets valid and near-valid values).
UNSUPPORTED: dict[str, str] = {}

# Defects of the generated codecs: key -> reason (a strict xfail each, so a fix shows up
# as a failure here and the entry is removed).
# None left: the last ones found (error paths that differ between the paths, fixed-size
# bytes padded in repeated records, a count derived from an absent list) are fixed.
VALID_DEFECTS: dict[str, str] = {}
NEAR_DEFECTS: dict[str, str] = {}
# More examples find more: the long runs' own lists (on top of the ones above).
LONG_VALID_DEFECTS: dict[str, str] = {**VALID_DEFECTS}
LONG_NEAR_DEFECTS: dict[str, str] = {**NEAR_DEFECTS}


class _Builders(Mapping):
    """Family name -> Builder of every project, made on first use: a builder runs every
    schema pass (emitters included) and loads the generated module, which collection
    (in every worker process) does not need."""

    @functools.cached_property
    def _all(self) -> dict[str, Builder]:
        out = {}
        for path in PROJECTS:
            for b in project_builders(project_mod.load(path)):
                out[b.family.name] = b
        return out

    def __getitem__(self, name: str) -> Builder:
        return self._all[name]

    def __iter__(self):
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)


def _keys() -> list[str]:
    """Every family.record of every project, from the passes up to layout."""
    out: dict[str, list[str]] = {}
    for path in PROJECTS:
        proj = project_mod.load(path)
        proj.activate()
        families = pipeline.run(proj.schema_files(), base=proj.root,
                                render_modules=False).families
        for name in sorted(families):
            out[name] = list(families[name].records)
    return [f"{fam}.{rec}" for fam, recs in out.items() for rec in recs]


BUILDERS = _Builders()
KEYS = _keys()


def _params(defects: dict[str, str]) -> list:
    return [pytest.param(k, id=k, marks=pytest.mark.xfail(strict=True, reason=defects[k]))
            if k in defects else pytest.param(k, id=k) for k in KEYS]


def _run(key: str, kind: str, examples: int) -> None:
    fam, rec = key.split(".", 1)
    r = run_record(BUILDERS[fam], rec, max_examples=examples, kind=kind,
                   shrink=False)
    if key in UNSUPPORTED:
        assert r.status == "unsupported", r.line()
        assert UNSUPPORTED[key] in r.detail, r.line()
        return
    assert r.status == "ok", r.line()
    if kind == "valid":
        assert r.examples >= 1, r.line()


def test_every_record_is_covered() -> None:
    assert len(KEYS) > 200
    assert KEYS == [f"{fam}.{rec}" for fam, b in BUILDERS.items() for rec in b.family.records]
    assert set(LONG_VALID_DEFECTS) | set(LONG_NEAR_DEFECTS) <= set(KEYS)
    assert not UNSUPPORTED  # every record is drawn for


@pytest.mark.parametrize("key", _params(VALID_DEFECTS))
def test_valid_values_round_trip_on_every_path(key: str) -> None:
    _run(key, "valid", VALID_EXAMPLES)


@pytest.mark.parametrize("key", _params(NEAR_DEFECTS))
def test_near_valid_values_are_refused_alike(key: str) -> None:
    if key in UNSUPPORTED:
        pytest.skip("no valid value to start from: see UNSUPPORTED")  # asserted by the valid test
    _run(key, "near", NEAR_EXAMPLES)


@pytest.mark.long
@pytest.mark.parametrize("key", _params(LONG_VALID_DEFECTS))
def test_valid_values_round_trip_long(key: str) -> None:
    _run(key, "valid", LONG_EXAMPLES)


@pytest.mark.long
@pytest.mark.parametrize("key", _params(LONG_NEAR_DEFECTS))
def test_near_valid_values_refused_long(key: str) -> None:
    if key in UNSUPPORTED:
        pytest.skip("no valid value to start from: see UNSUPPORTED")
    _run(key, "near", LONG_EXAMPLES)


def test_a_broken_value_is_reported_with_its_example(tmp_path: Path) -> None:
    """The runner reports a failure, not a pass, when a path disagrees."""
    b = BUILDERS["protolog"]
    fake = type("M", (), {})()
    for name in dir(b.module):
        setattr(fake, name, getattr(b.module, name))
    fake.encode_event = lambda value: b.module.encode_event(value) + b"\0"
    broken = Builder(b.family, fake)
    r = run_record(broken, "event", max_examples=5)
    assert r.status == "failed"
    assert "encoders disagree" in r.detail or "decode" in r.detail
    assert r.example.startswith("Event(")


def test_check_properties_verb_prints_a_line_per_record(capsys: pytest.CaptureFixture) -> None:
    from bytewright.cli.main import main

    code = main(["check", "--properties", "--examples", "3", "--project",
                 str(ROOT / "examples" / "protolog")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "valid protolog.event: ok (3 examples)" in out
    assert "near  protolog.log_file: ok" in out
    assert "6 checks: 6 ok, 0 failed, 0 unsupported" in out


def test_check_properties_verb_fails_on_a_failure(capsys: pytest.CaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from bytewright.cli.main import main
    from bytewright.properties import check as check_mod

    def broken(codecs, case):
        raise check_mod.PropertyFailure("fast decode", "decoded value differs at .seq")

    monkeypatch.setattr(check_mod, "check_valid", broken)
    code = main(["check", "--properties", "--examples", "2", "--project",
                 str(ROOT / "examples" / "protolog")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "valid protolog.event: failed: fast decode: decoded value differs at .seq" in out
    assert "minimal example: Event(" in out
    assert "3 failed" in out


def test_near_property_catches_an_encoder_that_accepts_a_broken_value() -> None:
    b = BUILDERS["protolog"]
    fake = type("M", (), {})()
    for name in dir(b.module):
        setattr(fake, name, getattr(b.module, name))

    def lenient(value):
        try:
            return b.module.encode_event(value)
        except Exception:  # noqa: BLE001 - the defect being simulated
            return b""

    fake.encode_event = lenient
    r = run_record(Builder(b.family, fake), "event", max_examples=5, kind="near",
                   shrink=False)
    assert r.status == "failed"
    assert "fast encode" in r.detail and "accepted" in r.detail


def test_drawn_values_follow_the_rules_callers_declare() -> None:
    """walchain's frame gets page_size from its file header, whose rule asks a multiple
    of 8; the frame's data is exactly page_size bytes; png's chunk list ends at IEND."""
    from hypothesis import given, settings

    seen = []

    @settings(max_examples=15, derandomize=True, deadline=None, database=None)
    @given(BUILDERS["walchain"].case_strategy("frame"),
           BUILDERS["png"].case_strategy("png_file"))
    def prop(frame, png) -> None:
        p = frame.params["page_size"]
        assert p % 8 == 0 and p >= 8
        assert len(frame.value.data) == p
        types = [c.chunk_type for c in png.value.chunks]
        assert types[-1] == 0x49454E44 and 0x49454E44 not in types[:-1]
        seen.append(len(types))

    prop()
    assert seen


def test_near_values_include_content_too_large_for_its_derived_size() -> None:
    """kladde's page content_size has valid max 4081 and is derived from the content: a
    content of 4082 bytes is a near-valid value both encoders must refuse at the size."""
    from hypothesis import given, settings

    from bytewright.properties.strategies import bind_sites
    from bytewright.runtime.errors import EncodeError

    b = BUILDERS["kladde"]
    seen = []

    @settings(max_examples=5, derandomize=True, deadline=None, database=None)
    @given(b.case_strategy("page"))
    def prop(case) -> None:
        assert len(case.value.content) <= 4081
        sites = [s for s in case.sites if s.path == "page.content" and s.kind == "valid"]
        assert [s.detail for s in sites] == ["4082 bytes, above the valid range of its size"]
        bind_sites(case.value, case.sites)
        sites[0].apply()
        for enc in (b.module.encode_page, b.module.construct_encode_page):
            try:
                enc(case.value)
            except EncodeError as exc:
                seen.append(exc.path)
            else:
                raise AssertionError(f"{enc.__name__} accepted a content of 4082 bytes")

    prop()
    assert seen and set(seen) == {"page.content_size"}


@pytest.mark.parametrize("examples", budget(LONG_EXAMPLES, 6))
def test_tied_lengths_spans_and_params_are_solved_not_filtered(examples: int) -> None:
    """pile's retired proof bodies tie a length field (body_len), the edge count, the
    span param and the exact size of the body together: every draw meets all of them
    (the edge count is free, the rest is computed), so none is thrown away and the
    proof-v1 body is never flaky; a param that is only the exact size of a record field
    (proof_v2_data's body_len) is the encoded length of the value drawn for it."""
    from hypothesis import given, settings

    b = BUILDERS["pile"]
    m = b.module
    edges: set[int] = set()

    @settings(max_examples=40, derandomize=True, deadline=None, database=None)
    @given(b.case_strategy("proof_v1_body"), b.case_strategy("proof_v2_body"),
           b.case_strategy("proof_v3_body"), b.case_strategy("proof_v2_data"))
    def prop(v1, v2, v3, data) -> None:
        for case, enc, edge in ((v1, m.encode_proof_v1_content, 128),
                                (v2, m.encode_proof_v2_content, 145),
                                (v3, m.encode_proof_v3_content, 161)):
            n = case.value.body_len
            assert len(enc(case.value.data.body)) == n
            assert (n - (n % edge)) // edge >= 1 and case.params["span"] == (96 + n + 255) // 256
            edges.add(len(case.value.data.body.edges))
        assert data.params["body_len"] == len(m.encode_proof_v2_content(data.value.body))

    prop()
    assert {1, 2} <= edges
    for rec in ("proof_v1_body", "proof_v1_data", "proof_v2_data", "proof_v3_data",
                "proof_v2_body", "proof_v3_body"):
        for kind in ("valid", "near"):
            r = run_record(b, rec, max_examples=examples, kind=kind, shrink=False)
            assert r.status == "ok" and (kind == "near" or r.examples == examples), r.line()
