"""The generator: determinism, drift detection, schema problems with file/line/path."""

from __future__ import annotations

import shutil
from pathlib import Path

from bytewright.cli.main import main
from bytewright.generator import pipeline
from bytewright.review import checks

HTT = pipeline.SCHEMA_DIR / "htt.yaml"


def run_with(text: str) -> pipeline.Result:
    return pipeline.run([HTT], texts={str(HTT): text})


def test_generation_is_deterministic_and_matches_checked_in():
    a = pipeline.run()
    b = pipeline.run()
    assert not a.problems
    assert a.modules == b.modules
    assert checks.drift(a) == []
    text = a.modules["htt.py"]
    assert "DO NOT EDIT" in text.splitlines()[0]
    assert "schemas/htt.yaml" in text.splitlines()[0]
    assert a.families["htt"].digest in text


def test_generated_construct_definitions_compile():
    from bytewright.generated import htt
    for name in htt.RECORDS:
        compiled = getattr(htt, f"C_{name}").compile()
        assert compiled is not None


def test_schema_edit_without_regeneration_is_drift_naming_the_record(tmp_path: Path):
    text = HTT.read_text().replace("{name: node_count, type: u32",
                                   "{name: node_count, type: u64")
    result = run_with(text)
    assert not result.problems
    drifts = [d for d in checks.drift(result) if d.module == "htt.py"]
    assert len(drifts) == 1
    assert "file_header" in drifts[0].records
    assert "wal_entry" not in drifts[0].records
    assert "-" in drifts[0].diff and "+" in drifts[0].diff


def test_check_command_fails_on_drift(tmp_path: Path, monkeypatch, capsys):
    gen = tmp_path / "generated"
    shutil.copytree(pipeline.GENERATED_DIR, gen)
    path = gen / "htt.py"
    path.write_text(path.read_text().replace("def _d_wal_entry(", "def _d_wal_entry_x(", 1))
    # A project whose output folder is the tampered copy (verbs read the project file).
    (tmp_path / "bytewright.toml").write_text(
        f'schemas = ["{pipeline.SCHEMA_DIR}"]\noutput = "generated"\n', encoding="utf-8")
    assert main(["check", "--no-compiled", "--family", "htt", "--project", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "DRIFT generated/htt.py" in err  # one line
    assert "wal_entry" not in out  # the diff only on request
    assert main(["check", "--no-compiled", "--diff", "--family", "htt",
                 "--project", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "DRIFT generated/htt.py" in err and "_d_wal_entry" in out


def test_check_command_passes(capsys):
    assert main(["check", "--no-compiled"]) == 0
    out = capsys.readouterr().out
    assert "no drift" in out and " 0 failed" in out


def problems_of(text: str) -> list:
    return list(run_with(text).problems)


def test_unknown_key_reported_with_line_and_path():
    text = HTT.read_text().replace("      - {name: dimension, type: u8,",
                                   "      - {name: dimension, type: u8, colour: red,")
    probs = problems_of(text)
    assert len(probs) == 1
    p = probs[0]
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "colour" in ln)
    assert p.file.endswith("htt.yaml") and p.line == line
    assert p.path == "records.file_header.fields[3]"
    assert "colour" in p.message


def test_unknown_type_reported():
    text = HTT.read_text().replace("{name: flags, type: epoch_flags}",
                                   "{name: flags, type: epoch_flagz}")
    probs = problems_of(text)
    assert any(p.path == "records.epoch_body.fields[1].type" and "epoch_flagz" in p.message
               and p.line is not None for p in probs)


def test_bad_expression_reported():
    text = HTT.read_text().replace('repeat: {count: "semantic_dims - 16"}}',
                                   'repeat: {count: "semantic_dims - import"}}', 1)
    probs = problems_of(text)
    assert probs and "cannot parse expression" in probs[0].message
    assert probs[0].path.endswith("repeat.count")


def test_unknown_name_in_expression_reported():
    text = HTT.read_text().replace('if: "semantic_dims > 0"', 'if: "semantic_dimz > 0"', 1)
    probs = problems_of(text)
    assert any("semantic_dimz" in p.message for p in probs)


def test_duplicate_enum_value_reported():
    text = HTT.read_text().replace("DELETE: {value: 3,", "DELETE: {value: 2,")
    probs = problems_of(text)
    assert any("already used by UPDATE" in p.message and p.path == "enums.wal_op.values.DELETE"
               for p in probs)


def test_retired_value_reuse_reported():
    text = HTT.read_text().replace("    doc: WAL operation code; 0x07-0xFF are reserved.",
                                   "    doc: WAL operation code.\n    retired: [6]")
    probs = problems_of(text)
    assert any("retired" in p.message and p.path == "enums.wal_op.values.EPOCH" for p in probs)


def test_yaml_syntax_error_has_line():
    probs = problems_of(HTT.read_text() + "\n  bad: [unclosed\n")
    assert probs and probs[0].line is not None and "YAML syntax" in probs[0].message


def test_meta_schema_is_published_json_schema():
    import json

    import jsonschema
    schema = json.loads(pipeline.META_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
