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
def compiled(compiler, families, tmp_path_factory):
    """family -> (Kaitai-generated Python module, export metadata)."""
    out = tmp_path_factory.mktemp("ksy")
    assert cli_main(["export", "ksy", "--out", str(out)]) == 0
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


def test_export_writes_ksy_per_family(tmp_path, families):
    assert cli_main(["export", "ksy", "--out", str(tmp_path)]) == 0
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
