"""``bytewright doc``: Markdown, HTML and JSON carry the known HTT layout facts."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from bytewright.cli import main as cli_main
from bytewright.generator import pipeline
from bytewright.review import docs


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    assert cli_main.main(["doc", "--out", str(out)]) == 0
    return out


def _field(doc, family, record, name, layout=0):
    fam = next(f for f in doc["families"] if f["name"] == family)
    rec = next(r for r in fam["records"] if r["name"] == record)
    return next(f for f in rec["layouts"][layout]["fields"] if f["name"] == name), rec


def test_outputs_written(site):
    names = {p.name for p in site.iterdir()}
    # the family names come from the layout pass; the emitters are not needed for them
    families = sorted(pipeline.run(render_modules=False).families)
    assert "htt" in families
    want = {"index.html", "index.md", "layouts.json"}
    want |= {f"{f}.{ext}" for f in families for ext in ("md", "html")}
    assert names == want


def test_json_validates_and_has_offsets(site):
    doc = json.loads((site / "layouts.json").read_text(encoding="utf-8"))
    docs.validate_json(doc)
    assert doc["format"] == "bytewright-layouts" and doc["version"] == 1
    nc, rec = _field(doc, "htt", "file_header", "node_count")
    assert (nc["offset"], nc["size"], nc["type"]) == (24, 4, "u32")
    crc, _ = _field(doc, "htt", "file_header", "header_crc")
    assert (crc["offset"], crc["size"]) == (28, 4)
    assert crc["checksum"]["algorithm"] == "crc32"
    assert crc["checksum"]["byte_ranges"] == [[0, 28]]
    magic, _ = _field(doc, "htt", "file_header", "magic")
    assert magic["constraints"][0]["kind"] == "magic"
    assert rec["layouts"][0]["fixed_size"] == 32
    rows = rec["layouts"][0]["diagram"]
    assert len(rows) == 2 and sum(s["width"] for r in rows for s in r) == 32
    # the JSON Schema rejects a broken document
    bad = json.loads(json.dumps(doc))
    bad["families"][0]["records"][0]["layouts"][0]["fields"][0]["offset"] = "zero"
    with pytest.raises(jsonschema.ValidationError):
        docs.validate_json(bad)


def test_versions_and_changes_in_json(site):
    doc = json.loads((site / "layouts.json").read_text(encoding="utf-8"))
    fam = next(f for f in doc["families"] if f["name"] == "htt")
    snap = next(r for r in fam["records"] if r["name"] == "snapshot_section")
    ids = [lay["id"] for lay in snap["layouts"]]
    assert ids == ["snapshot_section-v1", "snapshot_section-v2-4"]
    v2 = snap["layouts"][1]
    assert v2["previous"] == "snapshot_section-v1"
    assert [c["rule"] for c in v2["changes"]] == ["W002"]
    assert "snapshot_crc" in v2["changes"][0]["message"]
    assert fam["versions"] == {"current": 2, "accepted": [1, 4], "retired": [],
                               "doc": fam["versions"]["doc"]}
    wal_op = next(e for e in fam["enums"] if e["name"] == "wal_op")
    assert [m["value"] for m in wal_op["members"]] == [1, 2, 3, 4, 5, 6]


def test_markdown_tables(site):
    md = (site / "htt.md").read_text(encoding="utf-8")
    assert re.search(r"^\| 24 \| 4 \| u32 \| `file_header.node_count` \|", md, re.M)
    assert re.search(r"^\| 28 \| 4 \| u32 \| `file_header.header_crc` \|.*crc32", md, re.M)
    assert "magic = 48545400 (HTT\\x00)" in md
    assert "reserved, must be zero" in md
    assert "| 6 | 0x06 | `EPOCH` |" in md
    assert "node_count" in md.split("```text", 1)[1].split("```", 1)[0]  # byte diagram
    assert "Changes from snapshot_section-v1" in md
    index = (site / "index.md").read_text(encoding="utf-8")
    assert "[htt](htt.md)" in index


def test_html_self_contained(site):
    html = (site / "htt.html").read_text(encoding="utf-8")
    assert "<style>" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "external fetch"
    assert 'data-field="file_header.node_count"><td class="num offset">24</td>' in html
    assert 'href="#snapshot_section-v2-4-changes"' in html
    assert 'id="snapshot_section-v2-4-changes"' in html
    assert 'class="bytes"' in html
    assert re.search(r'<td class="c\d" colspan="4" title="node_count bytes 24..27">', html)


def test_deterministic(site, shipped_schemas):
    # two independent loads and renders: the CLI's site and one in this process
    a = {p.name: p.read_text(encoding="utf-8") for p in site.iterdir()}
    b = docs.render_all(docs.build_model(shipped_schemas))
    assert a == b
