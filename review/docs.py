"""``bytewright doc``: one documentation model from the IR, three outputs.

``build_model`` turns pipeline results into plain data (the JSON document, versioned and
described by ``docs/doc-json-schema.json``); the Markdown and HTML renderers are Jinja
templates (``templates/doc_*.j2``) over that same model, so the three outputs cannot
disagree. Output is deterministic: no timestamps, sorted where the schema has no order.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jinja2

from ..generator import byteorder, checksum_cover, defaults, ir, pipeline
from . import diff, svg
from . import diff_rules as dr

DOC_FORMAT = "bytewright-layouts"
DOC_VERSION = 1
JSON_SCHEMA = pipeline.PACKAGE_ROOT / "docs" / "doc-json-schema.json"
ROW = 16  # bytes per byte-diagram row


# -- the model ----------------------------------------------------------------------------

def _enum(e: ir.EnumDef, kind: str) -> dict:
    return {"name": e.name, "kind": kind, "base": e.base.name, "doc": e.doc.strip(),
            "spec": e.spec, "open": e.open, "retired": sorted(e.retired), "line": e.line,
            "members": [{"name": m.name, "value": m.value, "hex": f"0x{m.value:02X}",
                         "doc": m.doc.strip()} for m in e.members]}


def _flags(fd: ir.FlagsDef) -> dict:
    return {"name": fd.name, "base": fd.base.name, "doc": fd.doc.strip(), "spec": fd.spec,
            "line": fd.line,
            "bits": [{"name": b.name, "lo": b.lo, "width": b.width, "mask": f"0x{b.mask:X}",
                      "bits": str(b.lo) if b.width == 1 else f"{b.lo}-{b.lo + b.width - 1}",
                      "enum": b.enum, "doc": b.doc.strip()} for b in fd.bits]}


def _constraints(f: ir.Field, fam: ir.Family) -> list[dict]:
    out = []
    if f.const is not None:
        text = f.const.hex() if isinstance(f.const, bytes) else str(f.const)
        shown = ""
        if isinstance(f.const, bytes):
            shown = " (" + "".join(chr(c) if 32 <= c < 127 else f"\\x{c:02x}"
                                   for c in f.const) + ")"
        out.append({"kind": "magic", "text": f"magic = {text}{shown}"})
    if f.reserved:
        out.append({"kind": "reserved", "text": "reserved, must be zero"})
    if isinstance(f.type, ir.RefT) and f.type.kind == "enum":
        e = fam.enums[f.type.target]
        vals = ", ".join(f"{m.name}={m.value}" for m in e.members)
        out.append({"kind": "enum", "text": f"enum {e.name}: {vals}"
                    + (" (open)" if e.open else "")})
    if isinstance(f.type, ir.RefT) and f.type.kind == "flags":
        out.append({"kind": "flags", "text": f"flags {f.type.target}"})
    if f.bits:  # named bit ranges (numbered from the least significant bit)
        parts = []
        for p in f.bits:
            at = str(p.lo) if p.width == 1 else f"{p.lo}..{p.lo + p.width - 1}"
            more = (f" {p.enum}" if p.enum else "") + (
                f" = {p.const}" if p.const is not None else "") + (
                f" = {p.value.source}" if p.value is not None else "")
            parts.append(f"{p.name} bit{'s' if p.width > 1 else ''} {at}{more}")
        out.append({"kind": "bits", "text": "bits (0 = least significant): "
                    + ", ".join(parts)})
    sentinel = f.absent if f.absent is not None else (
        f.repeat.absent if f.repeat is not None else None)
    if sentinel is not None:
        out.append({"kind": "absent", "text": f"absent (None) when the "
                    f"{'count' if f.absent is None else 'length'} is {sentinel}"})
    if f.valid is not None:
        lo, hi = f.valid
        out.append({"kind": "range", "text": f"range {'' if lo is None else lo}.."
                                             f"{'' if hi is None else hi}"})
    if f.cond is not None:
        out.append({"kind": "condition", "text": f"present if {f.cond.source}"})
    if f.since is not None or f.until is not None:
        parts = []
        if f.since is not None:
            parts.append(f"since v{f.since}")
        if f.until is not None:
            parts.append(f"until v{f.until}")
        out.append({"kind": "version", "text": " ".join(parts)})
    if f.has_default:  # what readers of the other versions (or a false condition) see
        shown = (f"0x{f.default.hex()}" if isinstance(f.default, bytes)
                 else defaults.code(f, fam))  # an enum member by name
        out.append({"kind": "default", "text": f"default {shown} when absent"})
    if f.repeat is not None:
        rp = f.repeat
        how = (f"count {rp.count.source}" if rp.count is not None else
               f"{rp.prefix.name} count prefix" if rp.prefix is not None else "to end")
        out.append({"kind": "repeat", "text": f"repeated, {how}"})
    if f.size is not None:
        out.append({"kind": "size", "text": f"occupies {f.size.source} bytes"})
    if f.compressed is not None:
        c = f.compressed
        out.append({"kind": "compressed", "text": f"compressed ({c.algorithm.source}, "
                    f"{c.length.name + ' length' if c.length else 'stored size ' + c.stored if c.stored else 'self-terminating'}"
                    + (f", when {c.when.source}" if c.when is not None else "") + ")"})
    if f.derived_from is not None:
        out.append({"kind": "derived", "text": f"{f.derived_from[0]} of {f.derived_from[1]}"
                                               " (computed on write)"})
    if f.filled:
        out.append({"kind": "derived", "text": f"{f.filled} (filled on write)"})
    if isinstance(f.type, ir.SwitchT):
        cases = ", ".join(f"{lbl} -> {tgt or 'empty'}" for _, lbl, tgt in f.type.cases)
        out.append({"kind": "switch", "text": f"switch on {f.type.on.source}: {cases}; "
                                              f"default {f.type.default}"})
    return out


def _checksum(f: ir.Field, lay: ir.Layout) -> dict | None:
    c = f.checksum
    if c is None:
        return None
    names = [x.name for x in lay.fields]
    idx = names.index(f.name)
    covers = list(c.covers) if c.covers else [n for n in names[:idx] if n not in c.excluded]
    if c.covers is None and c.scope:  # following / all
        covers = checksum_cover.covered(lay.fields, idx)
    ranges = [list(r) for r in c.ranges]
    if c.ranges or c.files:
        covers = []
    for n in covers:
        off, size = lay.offsets.get(n), lay.sizes.get(n)
        if off is not None and size is not None:
            ranges.append([off, off + size])
    return {"algorithm": c.algorithm, "covers": covers,
            "preceding": c.covers is None and not c.ranges and not c.scope and not c.files,
            "except": list(c.excluded), "byte_ranges": _merge(ranges),
            "text": dr.checksum_text(c)}


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _type_text(f: ir.Field, fam: ir.Family) -> str:
    label = pipeline.type_label(f.type)
    if isinstance(f.type, ir.RefT) and f.type.kind == "alias":
        a = fam.aliases[f.type.target]
        label += f" ({a.base.name}" + (f", {a.fixed_point}" if a.fixed_point else "") + ")"
    elif isinstance(f.type, ir.RefT) and f.type.kind in ("enum", "flags"):
        base = byteorder.base_of(fam, f.type)
        label += f" ({base.name})"
    return label


def _field(f: ir.Field, lay: ir.Layout, rec: ir.Record, fam: ir.Family) -> dict:
    link = None
    if isinstance(f.type, ir.RefT):
        link = {"kind": f.type.kind, "target": f.type.target}
    return {"name": f.name, "path": f"{rec.name}.{f.name}",
            "offset": lay.offsets.get(f.name), "size": lay.sizes.get(f.name),
            "type": _type_text(f, fam), "link": link,
            "constraints": _constraints(f, fam), "checksum": _checksum(f, lay),
            "doc": f.doc.strip(), "spec": f.spec or rec.spec, "line": f.line}


def _located(loc: ir.Located, rec: ir.Record) -> dict:
    """A located field (``at:``): no offset or size in the record's own bytes."""
    where = {"at": lambda: f"at {loc.where.source}" + (f" from {loc.base}" if loc.base else ""),
             "find_last": lambda: f"last {loc.signature.hex()} within the last {loc.within} bytes",
             "from_end": lambda: f"{loc.where.source} bytes before the end",
             "each": lambda: f"one per item of {loc.each}, at its {loc.each_offset}"}[loc.how]()
    cons = [{"kind": "located", "text": where}]
    if loc.count is not None:
        cons.append({"kind": "repeat", "text": f"count {loc.count.source}"})
    if loc.size is not None:
        cons.append({"kind": "size", "text": f"{loc.size.source} bytes"})
    many = loc.how == "each" or loc.many
    return {"name": loc.name, "path": f"{rec.name}.{loc.name}", "offset": None, "size": None,
            "type": loc.target + ("[]" if many else ""),
            "link": None if loc.target == "bytes" else {"kind": "record", "target": loc.target},
            "constraints": cons,
            "checksum": None, "doc": loc.doc.strip(), "spec": rec.spec, "line": loc.line}


def _layout_id(rec: ir.Record, lay: ir.Layout) -> str:
    vs = lay.versions
    order = f"-{lay.order}" if lay.order else ""  # one layout per byte order
    if not vs:
        return rec.name + order
    return f"{rec.name}-v{vs[0]}" + (f"-{vs[-1]}" if len(vs) > 1 else "") + order


def _diagram(lay: ir.Layout, fields: list[dict]) -> list[list[dict]] | None:
    """Rows of ROW bytes; each cell a labelled span (a field split at row boundaries)."""
    total = lay.fixed_size
    if total is None or total == 0:
        return None
    spans = []
    for i, f in enumerate(fields):
        if f["offset"] is None or not f["size"]:
            return None
        spans.append((f["offset"], f["size"], f["name"], i))
    rows: list[list[dict]] = []
    for start in range(0, total, ROW):
        end = min(start + ROW, total)
        row = []
        for off, size, name, i in spans:
            a, b = max(off, start), min(off + size, end)
            if a < b:
                row.append({"name": name, "start": a, "width": b - a, "color": i % 8,
                            "cont": a > off, "more": b < off + size})
        rows.append(row)
    return rows


def _change(f: diff.Finding) -> dict:
    return {"rule": f.rule.id, "name": f.rule.name, "category": f.rule.category,
            "subject": f.subject, "message": f.message,
            "old_line": f.old.line if f.old else None, "new_line": f.new.line if f.new else None}


def _record(rec: ir.Record, fam: ir.Family, side: diff.Side) -> dict:
    steps = {id(lay): (prev, found) for prev, lay, found in diff.layout_steps(side, fam, rec)}
    layouts = []
    for lay in rec.layouts:
        fields = [_field(f, lay, rec, fam) for f in lay.fields]
        fields += [_located(loc, rec) for loc in rec.located]
        entry = {"id": _layout_id(rec, lay),
                 "versions": list(lay.versions) if lay.versions else None,
                 "label": ("all versions" if not lay.versions else
                           dr._vlabel(lay.versions)) + (f", {lay.order}" if lay.order else ""),
                 "fixed_size": lay.fixed_size, "fields": fields,
                 "diagram": _diagram(lay, fields), "previous": None, "changes": []}
        if id(lay) in steps:
            prev, found = steps[id(lay)]
            entry["previous"] = _layout_id(rec, prev)
            entry["changes"] = [_change(x) for x in found]
        layouts.append(entry)
    return {"name": rec.name, "doc": rec.doc.strip(), "spec": rec.spec, "file": rec.file,
            "line": rec.line,
            "params": [{"name": p.name, "type": p.type, "doc": p.doc,
                        "default": p.default if isinstance(p.default, (int, str, bool))
                        or p.default is None else str(p.default)}
                       for p in rec.params.values()],
            "version_from": rec.version_from,
            "versions": list(rec.version_range) if rec.version_range else None,
            "byte_order": byteorder.record_text(rec, fam),
            "layouts": layouts}


def build_model(side: diff.Side) -> dict:
    families = []
    for name in sorted(side.families):
        fam = side.families[name]
        reg = fam.versions
        families.append({
            "name": fam.name, "title": fam.title, "spec": fam.spec, "doc": fam.doc.strip(),
            "endian": byteorder.show(fam.endian_expr, fam.endian), "files": list(fam.files), "digest": fam.digest,
            "versions": None if reg is None else {
                "current": reg.current, "accepted": list(reg.accepted),
                "retired": sorted(reg.retired), "doc": reg.doc},
            "registries": [_enum(e, "registry") for e in fam.registries.values()],
            "enums": [_enum(e, "enum") for e in fam.enums.values()],
            "flags": [_flags(fd) for fd in fam.flags.values()],
            "types": [{"name": a.name, "base": a.base.name, "fixed_point": a.fixed_point,
                       "doc": a.doc.strip(), "line": a.line} for a in fam.aliases.values()],
            "records": [_record(r, fam, side) for r in fam.records.values()],
        })
    return {"format": DOC_FORMAT, "version": DOC_VERSION, "families": families}


# -- rendering ----------------------------------------------------------------------------

def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(pipeline.TEMPLATES)),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=autoescape)
    env.filters["md"] = _md_cell
    env.filters["num"] = lambda v: "—" if v is None else str(v)
    env.filters["hexoff"] = lambda v: "—" if v is None else f"0x{v:02X}"
    return env


def _md_cell(s: object) -> str:
    text = "" if s is None else str(s)
    return text.replace("|", "\\|").replace("\n", " ").strip()


def ascii_diagram(rows: list[list[dict]]) -> str:
    """A byte diagram for Markdown: 3 characters per byte, labels cut to their span."""
    head = "offset " + "".join(f"{i:02x} " for i in range(ROW))
    lines = [head.rstrip()]
    for r, row in enumerate(rows):
        cells = []
        for span in row:
            width = span["width"] * 3 - 1
            label = span["name"] + ("…" if span["more"] else "")
            if span["cont"]:
                label = "…" + label
            cells.append(label[:width].center(width))
        lines.append(f"{r * ROW:04x}  |" + "|".join(cells) + "|")
    return "\n".join(lines)


def render_markdown(model: dict) -> dict[str, str]:
    env = _env(False)
    env.filters["diagram"] = ascii_diagram
    out = {"index.md": env.get_template("doc_index.md.j2").render(model=model)}
    for fam in model["families"]:
        out[f"{fam['name']}.md"] = env.get_template("doc_family.md.j2").render(
            model=model, fam=fam)
    return {k: _tidy(v) for k, v in out.items()}


def with_diagrams(model: dict) -> dict:
    """A copy of ``model`` whose layouts carry their SVG byte diagram (``svg``) and, for a
    version after the first, the side-by-side view against the previous one
    (``compare``). Kept out of the JSON model, which stays data."""
    from markupsafe import Markup

    out = copy.deepcopy(model)
    for fam in out["families"]:
        for rec in fam["records"]:
            by_id = {lay["id"]: lay for lay in rec["layouts"]}
            for lay in rec["layouts"]:
                title = f"{fam['name']}.{rec['name']} {lay['label']}"
                lay["svg"] = Markup(svg.layout_svg(lay, title, ident=lay["id"]))
                prev = by_id.get(lay["previous"]) if lay["previous"] else None
                lay["compare"] = None if prev is None else Markup(svg.compare_svg(
                    prev, lay, f"{rec['name']} {prev['label']}",
                    f"{rec['name']} {lay['label']}", ident=f"{lay['id']}-compare"))
    return out


def render_html(model: dict) -> dict[str, str]:
    model = with_diagrams(model)
    env = _env(True)
    env.globals["ROW"] = ROW
    out = {"index.html": env.get_template("doc_index.html.j2").render(model=model)}
    for fam in model["families"]:
        out[f"{fam['name']}.html"] = env.get_template("doc_family.html.j2").render(
            model=model, fam=fam)
    return {k: _tidy(v) for k, v in out.items()}


def render_json(model: dict) -> str:
    return json.dumps(model, indent=2, ensure_ascii=False) + "\n"


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def render_all(model: dict) -> dict[str, str]:
    files = {}
    files.update(render_markdown(model))
    files.update(render_html(model))
    files["layouts.json"] = render_json(model)
    return files


def validate_json(doc: dict) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``doc`` matches the published schema."""
    import jsonschema

    schema = json.loads(JSON_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)


def write(out: Path, side: diff.Side | None = None) -> list[Path]:
    side = side or diff.shipped("schemas")
    model = build_model(side)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in sorted(render_all(model).items()):
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def render_diff_html(report: diff.Report, lines: bool = True) -> str:
    """A page with every finding and, for each record the change touches, its old and
    new layouts drawn side by side (the docs' version-to-version view)."""
    from html import escape

    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             f"<title>bytewright diff {escape(report.old)} -&gt; {escape(report.new)}</title>",
             "<style>body{font:14px system-ui,sans-serif;margin:24px}"
             ".compare{display:flex;flex-wrap:wrap;gap:16px}.compare .legend{flex-basis:100%}"
             ".mark{border:2px solid;padding:0 6px;margin-right:6px}"
             "li.breaking{color:#b42318}svg.bw-diagram{border:1px solid #e2e8f0}</style>",
             "</head><body>",
             f"<h1>bytewright diff: {escape(report.old)} → {escape(report.new)}</h1>"]
    c = report.counts()
    parts.append("<p>" + ", ".join(f"{n} {escape(k.lower())}" for k, n in c.items())
                 + ("; <strong>BREAKING</strong>" if report.breaking else "") + "</p><ul>")
    for f in report.findings:
        cls = ' class="breaking"' if f.breaking else ""
        parts.append(f"<li{cls}><code>{f.rule.id}</code> {escape(f.rule.category)} "
                     f"{escape(f.rule.name)}: <code>{escape(f.subject)}</code>: "
                     f"{escape(f.message)}" + "".join(
                         f"<br>&nbsp;&nbsp;– {escape(d)}" for d in f.details) + "</li>")
    parts.append("</ul>")
    if report.sides is not None:
        old, new = report.sides
        touched = {tuple(f.subject.split(".")[:2]) for f in report.findings
                   if f.rule.category != dr.DOC}
        for fam_name, rec_name in sorted(touched):
            of, nf = old.families.get(fam_name), new.families.get(fam_name)
            if of is None or nf is None or rec_name not in of.records \
                    or rec_name not in nf.records:
                continue
            orec = _record(of.records[rec_name], of, old)
            nrec = _record(nf.records[rec_name], nf, new)
            parts.append(f'<h2 id="{escape(fam_name)}.{escape(rec_name)}">'
                         f"{escape(fam_name)}.{escape(rec_name)}</h2>")
            for olay in orec["layouts"]:
                nlay = next((n for n in nrec["layouts"] if n["label"] == olay["label"]),
                            None) or (nrec["layouts"][-1] if len(orec["layouts"]) == 1
                                      else None)
                if nlay is None:
                    continue
                parts.append(svg.compare_svg(
                    olay, nlay, f"old {rec_name} {olay['label']}",
                    f"new {rec_name} {nlay['label']}", ident=f"{rec_name}-{olay['id']}"))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
