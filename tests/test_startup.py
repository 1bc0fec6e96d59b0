"""What a command line run loads before it answers.

A generated module builds its Construct path on first use, not on import; a format verb
imports its own family's module only; ``inspect`` and ``verify`` pick a file's family
from the generated modules' own plain data (``DETECT``), loading the IR of that family
alone from its module, without reading the schemas. Behaviour, not time: each check
looks at what a fresh interpreter holds in ``sys.modules`` or in a module's namespace.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bytewright.generated import htt, ze
from bytewright.generator import project
from bytewright.review import detect
from bytewright.review.verify import detection_table

OTHERS = ("bytewright.generated.htt", "bytewright.generated.pile",
          "bytewright.generated.kladde")
SCHEMA_PIPELINE = ("bytewright.generator.pipeline", "jinja2", "jsonschema")


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON document."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, str]:
    from bytewright.bench.startup import small_files

    return small_files(str(tmp_path_factory.mktemp("small")))


def test_ze_info_builds_no_construct_object_and_imports_its_own_family_only(small):
    # one fresh interpreter: the CLI imported, then `ze info`, then a Construct-path call
    got = _python("""
        import contextlib, io, json, sys
        import bytewright.cli.main
        after_cli = sorted(sys.modules)
        import construct
        import bytewright.runtime.codec  # its own Construct classes are not the module's
        made = []
        init = construct.Construct.__init__
        def counting(self, *a, **k):
            made.append(type(self).__name__)
            init(self, *a, **k)
        construct.Construct.__init__ = counting
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = bytewright.cli.main.main(["ze", "info", sys.argv[1]])
        from bytewright.generated import ze
        after_info = len(made)
        names = [n for n in vars(ze) if n.startswith(("C_", "_c2m_", "_m2c_"))]
        compiled = len(ze._COMPILED)
        mods = sorted(sys.modules)
        data = ze.encode_wal_file_header(ze.WalFileHeader(5))
        value = ze.construct_decode_wal_file_header(data)
        print(json.dumps({"code": code, "out": out.getvalue(), "after_cli": after_cli,
                          "mods": mods, "after_info": after_info, "names": names,
                          "compiled": compiled, "after_construct": len(made),
                          "built": "C_wal_file_header" in vars(ze),
                          "same": value == ze.decode_wal_file_header(data)[0],
                          "compiled_after": len(ze._COMPILED)}))
    """, small["wal"])
    # importing the CLI loads no verb, codec or schema tool
    assert not set(got["after_cli"]) & {"construct", "numpy", "bytewright.cli.check",
                                        "bytewright.cli.inspect", *SCHEMA_PIPELINE}
    assert got["code"] == 0 and "ZE wal (family 11)" in got["out"]
    mods = set(got["mods"])
    assert "bytewright.generated.ze" in mods
    assert not mods & set(OTHERS + SCHEMA_PIPELINE)
    assert not {m for m in mods if m.startswith("bytewright.cli.")} - {
        "bytewright.cli", "bytewright.cli.main", "bytewright.cli.common", "bytewright.cli.ze"}
    # the module was imported and used (fast path): no Construct object built, none compiled
    assert got["after_info"] == 0 and got["names"] == [] and got["compiled"] == 0
    assert got["after_construct"] > 0 and got["built"] and got["same"]
    assert got["compiled_after"] == 0  # compiled only when a compiled parse asks


def test_construct_names_are_there_on_first_read():
    # a read of C_<record> or a converter builds the path as a Construct-path call does
    con = ze.C_wal_frame
    assert con.parse(ze.encode_wal_frame(ze.WalFrame(1, 2, b"ab")))["payload"] == b"ab"
    assert callable(htt._c2m_file_header) and htt._BUILT
    with pytest.raises(AttributeError):
        ze.no_such_name  # noqa: B018 - a missing name stays missing


@pytest.mark.parametrize("which, family", [("wal", "ze"), ("htt", "htt")])
def test_inspect_detects_without_schemas_or_other_families(small, which, family):
    got = _python("""
        import io, json, sys, contextlib
        from bytewright.cli.main import main
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["inspect", sys.argv[1]])
        print(json.dumps({"code": code, "out": out.getvalue(),
                          "mods": sorted(m for m in sys.modules)}))
    """, small[which])
    assert got["code"] == 0, got["out"]
    assert f"detected: {family} magic" in got["out"]
    mods = set(got["mods"])
    assert f"bytewright.generated.{family}" in mods
    others = {m for m in mods if m.startswith("bytewright.generated.")} - {
        f"bytewright.generated.{family}"}
    assert others == set()
    assert not mods & set(SCHEMA_PIPELINE)


def test_plain_detection_data_is_the_table_the_ir_gives():
    # the rows read from the modules' text, and the rows verify derives from each IR
    proj = project.package_project()
    plain = detect.table(proj)
    fams = {name: detect.load_family(proj, name) for name in detect.module_files(proj)}
    assert sorted(plain, key=repr) == sorted(detection_table(fams), key=repr)
    assert {r[2] for r in plain} >= {"htt", "ze", "pile", "kladde"}
    for name, fam in fams.items():
        assert detect.plain_data(detect.module_files(proj)[name])["records"] == \
            tuple(fam.records)


def test_detect_line_is_plain_python_data():
    # read without importing: one line, a literal, equal to the imported value
    line = next(x for x in Path(ze.__file__).read_text().splitlines()
                if x.startswith("DETECT = "))
    assert ast.literal_eval(line[len("DETECT = "):]) == ze.DETECT


def test_serialised_ir_does_not_depend_on_the_hash_seed():
    # pickle order follows string hashes unless the serialiser fixes it: the schema
    # pipeline run here and in an interpreter with another seed give the checked-in text
    code = """
        import json
        from bytewright.generator import emit_index, pipeline, project
        paths = [p for p in project.package_project().schema_files() if p.name == "htt.yaml"]
        fam = pipeline.run(paths, render_modules=False).families["htt"]
        print(json.dumps(emit_index.ir_text(fam)))
    """
    other = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONHASHSEED": "1"})
    from bytewright.generator import emit_index, pipeline

    paths = [p for p in project.package_project().schema_files() if p.name == "htt.yaml"]
    here = emit_index.ir_text(pipeline.run(paths, render_modules=False).families["htt"])
    there = json.loads(other.communicate()[0])
    assert here == there
    assert "".join(ast.literal_eval(x.strip()) for x in here.splitlines()) == htt._IR


def test_modules_without_plain_data_fall_back_to_the_schemas(tmp_path):
    # a module generated before the plain data existed: its family is read from the
    # schemas (PlainData); a hand-written module in the output folder is no family
    old = tmp_path / "old.py"
    old.write_text(detect.GENERATED_HEADER + "schemas/old.yaml -- DO NOT EDIT.\n"
                   "FAMILY = 'old'\n", encoding="utf-8")
    with pytest.raises(detect.PlainData):
        detect.plain_data(old)
    mine = tmp_path / "helpers.py"
    mine.write_text("DETECT = []\n", encoding="utf-8")
    assert detect.plain_data(mine) == {}
