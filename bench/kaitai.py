"""The Kaitai contender: the Python parser Kaitai Struct generates from ``bytewright export ksy``.

``parsers()`` exports the schemas, compiles each ``.ksy`` with the Kaitai compiler 0.11
(``ci/install-kaitai.sh`` installs it under ``.ci-cache/kaitai``) and imports the result;
``status()`` says why not when that cannot be done, and the harness then reports Kaitai as
skipped with that message. Fields Kaitai cannot express come out as raw bytes (the HTT
Q64.64 tail, ZE's u128 doc id): the contenders convert them the fast way a Kaitai user
would (one precompiled ``struct`` per tail), the "raw tail + struct"
variant, the fastest Kaitai one. Kaitai verifies no checksum; that is noted, not added.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import shutil
import struct
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
KSC_DIR = Path(os.environ.get("BYTEWRIGHT_KSC_DIR", ROOT / ".ci-cache" / "kaitai"))
KSC = KSC_DIR / "node_modules" / "kaitai-struct-compiler"
COMPILE_JS = """
const c = require(process.argv[2]);
const fs = require("fs");
c.compile("python", JSON.parse(fs.readFileSync(process.argv[3], "utf8")), null, false)
.then(files => {
  for (const k in files) { fs.writeFileSync(process.argv[4] + "/" + k, files[k]); }
}).catch(e => { console.error(String(e)); process.exit(1); });
"""
NOTE = "Kaitai verifies no CRC (the .ksy reads checksums without checking them)"


@cache
def _build() -> tuple[dict[str, Any] | None, str | None]:
    try:
        import kaitaistruct  # noqa: F401
    except ImportError:
        return None, "kaitaistruct is not installed (pip install kaitaistruct)"
    if shutil.which("node") is None or not (KSC / "package.json").exists():
        return None, "no Kaitai compiler (run ci/install-kaitai.sh)"
    from bytewright.cli.main import main as cli_main

    out = Path(tempfile.mkdtemp(prefix="bw-bench-ksy-"))
    try:
        return _compile_into(out, cli_main)
    finally:
        shutil.rmtree(out, ignore_errors=True)  # the modules are imported by then


def _compile_into(out: Path, cli_main: Any) -> tuple[dict[str, Any] | None, str | None]:
    import contextlib

    with contextlib.redirect_stdout(io.StringIO()):
        if cli_main(["export", "ksy", "--out", str(out)]) != 0:
            return None, "bytewright export ksy failed"
    (out / "compile.js").write_text(COMPILE_JS, encoding="utf-8")
    py = out / "py"
    py.mkdir()
    mods = {}
    for name in ("htt", "ze", "pile", "kladde"):
        # the compiler takes ~5 s per .ksy: keep its output, keyed by the .ksy text and
        # the compiler's package.json (its version)
        digest = hashlib.sha256((out / f"{name}.ksy").read_bytes()
                                + (KSC / "package.json").read_bytes()).hexdigest()[:16]
        cached = KSC_DIR / "compiled" / f"{name}-{digest}.py"
        if cached.exists():
            shutil.copyfile(cached, py / f"{name}.py")
        else:
            # the .ksy is YAML; the compiler's JavaScript build takes the parsed document
            doc = out / f"{name}.ksy.parsed.json"
            doc.write_text(json.dumps(yaml.safe_load((out / f"{name}.ksy").read_text(
                encoding="utf-8"))), encoding="utf-8")
            proc = subprocess.run(["node", str(out / "compile.js"), str(KSC),
                                   str(doc), str(py)], capture_output=True,
                                  text=True, timeout=300, check=False)
            if proc.returncode != 0:
                return None, f"{name}.ksy does not compile: {proc.stderr.strip()[-300:]}"
            with contextlib.suppress(OSError):  # a read-only cache only costs time
                cached.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(py / f"{name}.py", cached)
        spec = importlib.util.spec_from_file_location(f"bw_bench_ksy_{name}", py / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods[name] = mod
    return mods, None


def status() -> str | None:
    """None when the Kaitai parsers are usable, else why not."""
    return _build()[1]


def _mods() -> dict[str, Any]:
    mods, why = _build()
    if mods is None:
        raise RuntimeError(why)
    return mods


def htt_wal(dims: int):
    """Parse INSERT entries into the hand_raw tuple form."""
    from kaitaistruct import KaitaiStream

    cls = _mods()["htt"].Htt.WalEntry
    st = struct.Struct("<" + "Qq" * dims) if dims else None

    def run(buf: bytes) -> list:
        ks, end, out = KaitaiStream(io.BytesIO(buf)), len(buf), []
        while ks.pos() < end:
            e = cls(dims, 0, ks)
            b = e.body
            tail = None
            if st is not None:
                halves = st.unpack(b.tail.dims)
                tail = [lo | (hi << 64) for lo, hi in zip(halves[0::2], halves[1::2], strict=True)]
            out.append((e.seq, 1, e.key, b.data, [(m.key, m.value) for m in b.meta], tail))
        return out
    return run


def ze_op7(buf: bytes) -> list:
    from kaitaistruct import KaitaiStream

    cls = _mods()["ze"].Ze.OpUpsertV2
    ks, end, out = KaitaiStream(io.BytesIO(buf)), len(buf), []
    while ks.pos() < end:
        r = cls(ks)
        out.append((int.from_bytes(r.doc_id, "little"), r.revision, r.vector.values))
    return out


def ze_nodes(buf: bytes) -> list:
    from kaitaistruct import KaitaiStream

    cls = _mods()["ze"].Ze.GraphNodeBlock
    ks, end, out = KaitaiStream(io.BytesIO(buf)), len(buf), []
    while ks.pos() < end:
        r = cls(64, 44, ks)
        f = r.factors
        fl = r.flags
        out.append((r.codes, (f.scale, f.normalized_norm, f.normalized_correction), r.degree,
                    int(fl.entry_seed) | int(fl.hub) << 1, r.neighbours))
    return out


def pile_blobs(buf: bytes) -> list:
    from kaitaistruct import KaitaiStream

    cls = _mods()["pile"].Pile.PileRecord
    ks, end, out = KaitaiStream(io.BytesIO(buf)), len(buf), []
    while ks.pos() < end:
        r = cls(ks)
        b = r.record.body
        out.append((b.head.timestamp, b.head.length, b.head.hash, b.data.payload))
    return out


def kladde_table(buf: bytes) -> list:
    """An address-table content's statements as ``_kladde_raw`` tuples (LEB128 fields are
    the .ksy's ``vlq_base128_le`` type: groups of 7 bits, read bit by bit)."""
    from kaitaistruct import KaitaiStream

    cls = _mods()["kladde"].Kladde.TableContent
    r = cls(KaitaiStream(io.BytesIO(buf)))
    out = []
    for st in r.statements:
        tag = st.tag if isinstance(st.tag, int) else st.tag.value
        b = st.body
        head = (st.id_delta.value, tag)
        if tag == 0:
            out.append(head + (b.offset_delta.value, b.size.value, b.address.value))
        elif tag == 1:
            out.append(head + (b.offset_delta.value, b.size.value))
        elif tag in (2, 3):
            out.append(head + (b.offset_delta.value,))
        elif tag == 4:
            out.append(head)
        else:
            out.append(head + (b.offset_delta.value, b.payload))
    return out
