"""The Kaitai Struct export, checked by the Kaitai compiler itself.

``bytewright export ksy`` writes one ``.ksy`` per family. This test installs the
reference compiler (``kaitai-struct-compiler`` 0.11 from npm, cached in ``.ci-cache``),
compiles every exported file to Python, parses every golden fixture with the
Kaitai-generated parser, and compares the result field by field with bytewright's own
decode. Fields the export lists as opaque (not expressible in Kaitai) are skipped, and
that list is checked to be what the header comment says. Skips only when npm cannot
reach the registry outside CI.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bytewright.cli.main import main as cli_main
from bytewright.generator import pipeline
from bytewright.review import checks, export_ksy

ROOT = Path(__file__).resolve().parent.parent
KSC_DIR = Path(os.environ.get("BYTEWRIGHT_KSC_DIR", ROOT / ".ci-cache" / "kaitai"))
KSC = KSC_DIR / "node_modules" / "kaitai-struct-compiler"
FIXTURES = sorted(checks.FIXTURE_DIR.glob("*/*.hex"))
COMPILE_JS = """
const c = require(process.argv[2]);
const fs = require("fs");
c.compile("python", JSON.parse(fs.readFileSync(process.argv[3], "utf8")), null, false)
.then(files => {
  for (const k in files) { fs.writeFileSync(process.argv[4] + "/" + k, files[k]); }
}).catch(e => { console.error(String(e)); process.exit(1); });
"""


def _compile(compiler: Path, ksy: Path, out: Path) -> None:
    """Compile ``ksy`` (YAML) to Python in ``out`` with the reference compiler (its
    JavaScript build takes the parsed document: the YAML is parsed here)."""
    js = out / "compile.js"
    js.write_text(COMPILE_JS, encoding="utf-8")
    doc = out / f"{ksy.stem}.ksy.parsed.json"
    doc.write_text(json.dumps(yaml.safe_load(ksy.read_text(encoding="utf-8"))),
                   encoding="utf-8")
    proc = subprocess.run(["node", str(js), str(compiler), str(doc), str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{ksy.name} does not compile: {proc.stderr}"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}: CI must run the Kaitai cross-check (ci/install-kaitai.sh)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def compiler() -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        _unavailable("node/npm not installed")
    pytest.importorskip("kaitaistruct") if not os.environ.get("CI") else None
    if not (KSC / "package.json").exists():
        KSC_DIR.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["npm", "install", "--prefix", str(KSC_DIR), "--no-audit",
                               "--no-fund", "--silent", "kaitai-struct-compiler@0.11.0"],
                              capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0 or not (KSC / "package.json").exists():
            _unavailable(f"npm could not install kaitai-struct-compiler: {proc.stderr[-500:]}")
    version = json.loads((KSC / "package.json").read_text())["version"]
    assert version == "0.11.0"
    return KSC


@pytest.fixture(scope="module")
def families():
    return pipeline.run(render_modules=False).families


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """The folder ``bytewright export ksy`` wrote (once for the module)."""
    out = tmp_path_factory.mktemp("ksy")
    assert cli_main(["export", "ksy", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def compiled(compiler, families, exported):
    """family -> (Kaitai-generated Python module, export metadata)."""
    out = exported
    mods = {}
    py = out / "py"
    py.mkdir()
    for name in sorted(families):
        _compile(compiler, out / f"{name}.ksy", py)
        mod = _load(py / f"{name}.py", f"ksy_{name}")
        meta = json.loads((out / f"{name}.ksy.json").read_text(encoding="utf-8"))
        mods[name] = (mod, meta)
    return mods


VARINT_CLASSES = {"VlqBase128Le", "VlqBase128Be", "Sleb128", "Zigzag", "VlqOffset",
                  "QuicVarint", "Vint"}


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


class Mismatch(AssertionError):
    pass


class Comparer:
    def __init__(self, fam, gen, meta) -> None:
        self.fam, self.gen, self.meta = fam, gen, meta
        self.by_class = {cls.__name__: rec for rec, cls in gen.RECORDS.items()}
        self.leaves = 0

    def kattr(self, kobj, rec: str, name: str):
        ids = [name] + [i for i, n in self.meta["renamed"]["fields"].get(rec, {}).items()
                        if n == name]
        vals = [getattr(kobj, i, None) for i in ids]
        present = [v for v in vals if v is not None]
        return present[0] if present else None

    def record(self, value, kobj, path: str) -> None:
        rec = self.by_class[type(value).__name__]
        opaque = set(self.meta["opaque"].get(rec, ()))
        ends = set(self.meta["terminated"].get(rec, ()))
        for f in dataclasses.fields(value):
            if f.name in opaque:
                continue
            k = self.kattr(kobj, rec, f.name)
            if f.name in ends and isinstance(k, list):
                k = k[:-1]  # Kaitai keeps the terminator item; bytewright consumes it
            self.value(getattr(value, f.name), k, f"{path}.{f.name}")

    def value(self, bw, k, path: str) -> None:  # noqa: PLR0912 - one case per kind
        if k is not None and type(k).__name__ in VARINT_CLASSES:
            k = k.value
        if isinstance(k, enum.Enum):
            k = k.value
        if bw is None:
            if k is not None and type(k).__name__ != "Empty":
                raise Mismatch(f"{path}: bytewright None, Kaitai {k!r}")
            return
        if dataclasses.is_dataclass(bw):
            if type(bw).__name__ in self.by_class:
                if k is None:
                    raise Mismatch(f"{path}: Kaitai has no value")
                self.record(bw, k, path)
                return
            for f in dataclasses.fields(bw):  # flags
                self.value(getattr(bw, f.name), getattr(k, f.name, None), f"{path}.{f.name}")
            return
        if hasattr(bw, "tolist"):
            bw = bw.tolist()
        if isinstance(bw, tuple) and hasattr(k, "_io"):  # a numpy row vs a Kaitai type
            rec = next(r for r in self.fam.records if _camel(r) == type(k).__name__)
            names = [f.name for f in self.fam.records[rec].model_fields]
            bw, k = list(bw), [getattr(k, n) for n in names]
        if isinstance(bw, (list, tuple)):
            if k is None or len(bw) != len(k):
                raise Mismatch(f"{path}: {len(bw)} items vs {None if k is None else len(k)}")
            for i, (a, b) in enumerate(zip(bw, k, strict=True)):
                self.value(a, b, f"{path}[{i}]")
            return
        if isinstance(bw, enum.Enum):
            bw = bw.value
        if isinstance(bw, bool) or isinstance(k, bool):
            ok = bool(bw) == bool(k)
        elif isinstance(bw, (bytes, bytearray, memoryview)):
            ok = bytes(bw) == (bytes(k) if isinstance(k, (bytes, bytearray)) else k)
        else:
            ok = bw == k
        if not ok:
            raise Mismatch(f"{path}: bytewright {bw!r}, Kaitai {k!r}")
        self.leaves += 1


def test_export_writes_ksy_per_family(exported, families):
    tmp_path = exported
    for name in families:
        text = (tmp_path / f"{name}.ksy").read_text(encoding="utf-8")
        assert text.startswith(f"# {name}.ksy: generated by `bytewright export ksy`")
        body = yaml.safe_load(text)
        assert body["meta"]["id"] == name and set(families[name].records) <= set(body["types"])
        meta = json.loads((tmp_path / f"{name}.ksy.json").read_text(encoding="utf-8"))
        for rec, fields in meta["opaque"].items():  # every opaque field is explained
            for f in fields:
                assert any(n.startswith(f"{rec}.{f}:") for n in meta["notes"]), (rec, f)
                assert f"#  - {rec}.{f}:" in text


def test_checksums_are_noted_not_verified(families):
    exp = export_ksy.export_family(families["htt"])
    assert any("header_crc: crc32 checksum read but not verified" in n for n in exp.notes)


def test_every_family_compiles(compiled, families):
    assert set(compiled) == set(families)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_parses_the_same_in_kaitai(path, compiled, families):
    from kaitaistruct import KaitaiStream

    fam_name = path.parent.name
    kmod, meta = compiled[fam_name]
    fx = checks.parse_fixture(path, path.read_text(encoding="utf-8"))
    gen = importlib.import_module(f"bytewright.generated.{fam_name}")
    value, _ = gen.DECODERS[fx.record](fx.data, **fx.params)
    top = getattr(kmod, _camel(fam_name))
    cls = getattr(top, _camel(fx.record))
    rec = families[fam_name].records[fx.record]
    args = []
    for p in rec.params.values():
        v = fx.params.get(p.name, p.default)
        args.append(int(v) if isinstance(v, (int, enum.Enum)) else v)
    kobj = cls(*args, KaitaiStream(io.BytesIO(fx.data)))
    if hasattr(kobj, "_fetch_instances"):
        kobj._fetch_instances()
    cmp = Comparer(families[fam_name], gen, meta)
    cmp.record(value, kobj, fx.record)
    if fx.data and (fx.record not in meta["opaque"] or len(meta["opaque"][fx.record]) < len(
            [f for f in rec.fields if f.in_model])):
        assert cmp.leaves > 0, "nothing was compared"


ZLIB_SCHEMA = """
bytewright: 1
family: zdemo
endian: le
records:
  packed:
    fields:
      - {name: raw_len, type: u32}
      - name: body
        type: bytes
        size: raw_len
        compressed: {algorithm: "'zlib'", length: u32}
      - {name: tail, type: u16be}
"""


def test_constant_zlib_is_a_kaitai_process(compiler, tmp_path):
    import zlib

    from kaitaistruct import KaitaiStream

    path = tmp_path / "zdemo.yaml"
    res = pipeline.run([path], texts={str(path): ZLIB_SCHEMA}, base=tmp_path)
    assert not res.problems, res.problems
    exp = export_ksy.export_family(res.families["zdemo"])
    body = next(e for e in exp.ksy["types"]["packed"]["seq"] if e["id"] == "body")
    assert body["process"] == "zlib" and body["size"] == "len_body"
    assert not exp.opaque
    (tmp_path / "zdemo.ksy").write_text(exp.text(), encoding="utf-8")
    _compile(compiler, tmp_path / "zdemo.ksy", tmp_path)
    mod = _load(tmp_path / "zdemo.py", "ksy_zdemo")
    plain = b"hello kaitai " * 9
    frame = zlib.compress(plain)
    data = len(plain).to_bytes(4, "little") + len(frame).to_bytes(4, "little") + frame + b"\x12\x34"
    k = mod.Zdemo.Packed(KaitaiStream(io.BytesIO(data)))
    assert (k.raw_len, k.body, k.tail) == (len(plain), plain, 0x1234)


def test_ksy_is_yaml_with_a_root_that_reads_the_detected_record(exported, families):
    """The file is YAML (not JSON), and the root's seq is not empty: it reads what the
    family's detect rules name."""
    for name, fam in families.items():
        text = (exported / f"{name}.ksy").read_text(encoding="utf-8")
        first = next(x for x in text.splitlines() if not x.startswith("#"))
        assert first == "meta:", first
        body = yaml.safe_load(text)
        assert [e["id"] for e in body["seq"]] == ["body"]
        t = body["seq"][0]["type"]
        targets = set(t["cases"].values()) if isinstance(t, dict) else {t}
        wanted = {r.record for r in fam.detect}
        named = {x for x in targets if x in fam.records} | {
            r for r in wanted for x in targets if x.startswith(r + "_")}
        assert named == wanted, (name, targets)


WHOLE = [p for p in FIXTURES if checks.parse_fixture(p, p.read_text(encoding="utf-8")).record
         in {"htt_file", "sidecar_segment", "header_page", "pile_record", "frame_file",
             "segment_header", "manifest_file", "wal_file", "purge_file"}]


@pytest.mark.parametrize("path", WHOLE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_from_bytes_parses_a_whole_file(path, compiled, families):
    """``<Family>.from_bytes(file)`` reads the file as ``verify`` does: ``body`` is the
    detected record (or a run of them), equal to bytewright's decode."""
    fam_name = path.parent.name
    kmod, meta = compiled[fam_name]
    fx = checks.parse_fixture(path, path.read_text(encoding="utf-8"))
    if fx.params:
        pytest.skip("a fixture decoded with parameters is not a whole file")
    gen = importlib.import_module(f"bytewright.generated.{fam_name}")
    value, end = gen.DECODERS[fx.record](fx.data)
    kobj = getattr(kmod, _camel(fam_name)).from_bytes(fx.data)
    body = kobj.body
    rule = next(r for r in families[fam_name].detect if r.record == fx.record)
    if rule.repeat:
        assert len(body.records) == 1
        body = body.records[0]
    elif rule.then:
        body = body.head
    assert type(body).__name__ == _camel(fx.record)
    cmp = Comparer(families[fam_name], gen, meta)
    cmp.record(value, body, fx.record)
    assert cmp.leaves > 0


def test_enum_names_are_kaitai_identifiers_and_every_change_is_listed(exported, families):
    import re

    for name, fam in families.items():
        ksy = yaml.safe_load((exported / f"{name}.ksy").read_text(encoding="utf-8"))
        renamed = json.loads((exported / f"{name}.ksy.json").read_text())["renamed"]
        for enum_name, members in ksy.get("enums", {}).items():
            orig = next(e for e in [*fam.enums.values(), *fam.registries.values()]
                        if export_ksy.ident(e.name) == enum_name)
            changed = renamed["enums"].get(orig.name, {})
            for m in orig.members:
                new = members[m.value]
                assert re.fullmatch(r"[a-z][a-z0-9_]*", new), new
                if new != m.name:
                    assert changed[new] == m.name
                else:
                    assert new not in changed
    renamed = json.loads((exported / "htt.ksy.json").read_text())["renamed"]
    assert renamed["enums"]["wal_op"]["set_meta"] == "SET_META"


@pytest.mark.parametrize("name,want", [("SET_META", "set_meta"), ("SetMeta", "set_meta"),
                                       ("v1", "v1"), ("1st", "n_1st"), ("if", "if_"),
                                       ("true", "true_"), ("a-b c", "a_b_c")])
def test_ident(name, want):
    assert export_ksy.ident(name) == want


VARINTS = """
bytewright: 1
family: varints
endian: le
records:
  all:
    fields:
      - {name: u, type: uleb128}
      - {name: s, type: sleb128}
      - {name: z, type: zigzag}
      - {name: zc, type: uleb128, convert: zigzag}
      - {name: v, type: vlq}
      - {name: o, type: vlq_offset}
      - {name: q, type: quic_varint}
      - {name: e, type: vint}
      - {name: key, type: bytes, length: zigzag}
      - {name: items, type: u8, repeat: {prefix: sleb128}}
      - {name: tail, type: u16}
"""


def test_integer_kinds_are_read_by_kaitai(compiler, tmp_path):
    """Every built-in LEB128/VLQ/prefix-length kind is a Kaitai type whose ``value`` is
    the integer bytewright writes: nothing is opaque."""
    from bytewright.runtime import numbers, varint

    path = tmp_path / "varints.yaml"
    res = pipeline.run([path], texts={str(path): VARINTS}, base=tmp_path,
                       render_modules=False)
    assert not [p for p in res.problems if p.severity == "error"], res.problems
    exp = export_ksy.export_family(res.families["varints"])
    assert exp.opaque == {} and not [n for n in exp.notes if n.startswith("all.")]
    (tmp_path / "varints.ksy").write_text(exp.text(), encoding="utf-8")
    _compile(compiler, tmp_path / "varints.ksy", tmp_path)
    mod = _load(tmp_path / "varints.py", "ksy_varints")
    cases = [
        dict(u=0, s=0, z=0, zc=0, v=0, o=0, q=0, e=0),
        dict(u=300, s=-1, z=-1, zc=1, v=0x80, o=128, q=15293, e=300),
        dict(u=2**64 - 1, s=-2**63, z=-2**63, zc=2**63 - 1, v=0x0FFFFFFF, o=2**20,
             q=2**62 - 1, e=2**40),
        dict(u=127, s=63, z=-64, zc=-3, v=127, o=127, q=63, e=126),
    ]
    for c in cases:
        data = (varint.encode_uleb128(c["u"]) + varint.encode_sleb128(c["s"])
                + varint.encode_zigzag(c["z"]) + varint.encode_zigzag(c["zc"])
                + numbers.encode_vlq(c["v"]) + numbers.encode_vlq(c["o"], max_bytes=10,
                                                                  add_one=True)
                + numbers.encode_quic(c["q"]) + numbers.encode_vint(c["e"])
                + varint.encode_zigzag(2) + b"hi"
                + varint.encode_sleb128(3) + b"\x01\x02\x03" + b"\x34\x12")
        k = mod.Varints.All.from_bytes(data)
        got = {n: getattr(k, n).value for n in c}
        assert got == c
        assert (k.key, k.items, k.tail) == (b"hi", [1, 2, 3], 0x1234)


ASCII = """
bytewright: 1
family: digits
endian: le
types:
  oct8: {integer: ascii, radix: 8, width: 8, end: "hex:00"}
records:
  hdr:
    fields:
      - {name: size, type: oct8}
      - {name: mode, type: u16}
"""


def test_ascii_digits_are_opaque_with_the_reason():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "digits.yaml"
        res = pipeline.run([path], texts={str(path): ASCII}, base=Path(d),
                           render_modules=False)
    exp = export_ksy.export_family(res.families["digits"])
    assert exp.opaque == {"hdr": ["size"]}
    assert any(n.startswith("hdr.size: ASCII digits") for n in exp.notes)
    size, mode = exp.ksy["types"]["hdr"]["seq"]
    assert size["size"] == 8 and mode == {"id": "mode", "type": "u2le"}


def test_protolog_example_signed_varints_are_kaitai_types():
    """The protolog example's zigzag, sleb128 and zigzag-converted fields (once opaque
    bytes) are typed by the integer kinds' Kaitai types."""
    src = ROOT / "examples" / "protolog" / "schemas" / "protolog.yaml"
    fam = pipeline.run([src], render_modules=False).families["protolog"]
    exp = export_ksy.export_family(fam)
    seq = {e["id"]: e for t in exp.ksy["types"].values() for e in t.get("seq", ())}
    assert (seq["time_delta"]["type"], seq["value"]["type"], seq["offset"]["type"]) == (
        "zigzag", "sleb128", "zigzag")
    assert {"vlq_base128_le", "zigzag", "sleb128"} <= set(exp.ksy["types"])
    assert not any(n.split(":")[0].endswith((".time_delta", ".value", ".offset"))
                   for n in exp.notes)
