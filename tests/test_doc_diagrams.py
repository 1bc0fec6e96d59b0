"""SVG byte diagrams in the HTML docs: one per record version, drawn from the layout."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from bytewright.review import docs, svg

NS = {"s": "http://www.w3.org/2000/svg"}


@pytest.fixture(scope="module")
def model(shipped_schemas):
    return docs.build_model(shipped_schemas)


@pytest.fixture(scope="module")
def html(model):
    return docs.render_html(model)


def _svgs(page: str) -> dict[str, ET.Element]:
    out = {}
    for m in re.finditer(r"<svg .*?</svg>", page, re.S):
        el = ET.fromstring(m.group(0))  # well-formed XML, or this raises
        out[el.get("data-layout")] = el
    return out


def test_one_diagram_per_record_version(model, html):
    total = 0
    for fam in model["families"]:
        svgs = _svgs(html[f"{fam['name']}.html"])
        for rec in fam["records"]:
            for lay in rec["layouts"]:
                el = svgs[lay["id"]]
                total += 1
                drawn = {r.get("data-field") for r in el.iterfind(".//s:rect", NS)
                         if r.get("class") == "field"}
                sized = {f["name"] for f in lay["fields"] if f["size"] != 0}
                assert drawn == sized, (lay["id"], sized - drawn)
                assert int(el.get("height")) > 40 and int(el.get("width")) > 400
    assert total > 100


def _field_rects(el: ET.Element, name: str) -> list[ET.Element]:
    return [r for r in el.iterfind(".//s:rect", NS) if r.get("data-field") == name]


def test_offsets_brackets_variable_and_repeated(model, html):
    svgs = _svgs(html["htt.html"])
    hdr = svgs["file_header"]
    offsets = [t.text for t in hdr.iterfind(".//s:text", NS) if t.get("class") == "offset"]
    assert offsets[:3] == ["0", "4", "8"] and "28" in offsets
    (bracket,) = [p for p in hdr.iterfind(".//s:path", NS) if p.get("class") == "bracket"]
    assert "crc32 → header_crc" in "".join(hdr.itertext())
    # flags shares the second row with version/dimension/semantic_dims: RFC columns
    (flags,) = _field_rects(hdr, "flags")
    (version,) = _field_rects(hdr, "version")
    assert flags.get("y") == version.get("y") and float(flags.get("x")) > float(version.get("x"))
    snap = svgs["snapshot_section-v2-4"]
    text = "".join(snap.itertext())
    assert "compressed (" in text and "crc32 → snapshot_crc" in text
    (entries,) = _field_rects(snap, "entries")
    assert entries.get("stroke-dasharray")  # variable length
    assert "entries[…]" in text  # repeated


def test_version_to_version_view(model, html):
    page = html["htt.html"]
    m = re.search(r'<div class="compare" data-compare="sidecar_segment-v2-compare">(.*?)'
                  r"</div></div>", page, re.S)
    assert m, "no side-by-side view for sidecar_segment v1 -> v2"
    old_svg, new_svg = re.findall(r"<svg .*?</svg>", m.group(0), re.S)
    old, new = ET.fromstring(old_svg), ET.fromstring(new_svg)
    (layout,) = _field_rects(new, "layout")
    assert layout.get("stroke") == svg.MARKS["added"][0]
    (gone,) = _field_rects(old, "reserved6")
    assert gone.get("stroke") == svg.MARKS["removed"][0]
    om, nm = svg.changes(*[lay for lay in next(
        r for f in model["families"] if f["name"] == "htt" for r in f["records"]
        if r["name"] == "sidecar_segment")["layouts"]])
    assert om == {"reserved6": "removed"} and nm == {"layout": "added"}


def test_json_model_stays_data(model):
    """The SVGs live in the HTML only; layouts.json keeps its published schema."""
    docs.validate_json(model)
    assert "svg" not in model["families"][0]["records"][0]["layouts"][0]
