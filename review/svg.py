"""Byte diagrams as SVG, drawn from the documentation model of one layout.

RFC-style packet diagrams: rows of 32 bits (4 bytes), bit numbers on the top axis, the
byte offset of each row on the left. Fixed fields sit at their offsets; a field longer
than ``ELIDE`` bytes is drawn as a short block with its size written in it (a 4 KiB page
would otherwise be a thousand rows); variable-length fields take a whole row with a
dashed border, repeated ones a stacked border, conditional ones a hatched fill. Checksum
coverage and compressed regions are brackets in the right margin. ``highlight`` marks
fields as added / changed / moved / removed for the version-to-version view.

Pure string building (no dependency); output is deterministic so the docs stay stable.
"""

from __future__ import annotations

from html import escape

BYTES_PER_ROW = 4
CELL = 118  # px per byte
ROW_H = 34
LEFT = 64  # offset axis
TOP = 34  # bit axis
ELIDE = 16  # bytes: longer fixed fields are drawn as a block of ELIDE_ROWS rows
ELIDE_ROWS = 2
BRACKET_W = 18
PALETTE = ("#dbeafe", "#dcfce7", "#fef3c7", "#fce7f3", "#e0e7ff", "#ccfbf1", "#ffedd5",
           "#ede9fe")
MARKS = {"added": ("#16a34a", "#bbf7d0"), "changed": ("#ea580c", "#fed7aa"),
         "moved": ("#2563eb", "#bfdbfe"), "removed": ("#dc2626", "#fecaca")}


def _kinds(field: dict) -> set[str]:
    return {c["kind"] for c in field.get("constraints", ())}


def _short(text: str, width_px: float) -> str:
    room = max(int(width_px / 7.2), 3)
    return text if len(text) <= room else text[:room - 1] + "…"


class _Box:
    def __init__(self, name: str, x: float, y: float, w: float, h: float) -> None:
        self.name, self.x, self.y, self.w, self.h = name, x, y, w, h


def place(fields: list[dict]) -> tuple[list[tuple[dict, list[_Box]]], list[str], int]:
    """Boxes for every field (a fixed field may wrap over rows), the offset label of
    each row, and the number of rows."""
    out: list[tuple[dict, list[_Box]]] = []
    labels: list[str] = []
    row, col = 0, 0  # the next free cell
    known: int | None = 0  # the real byte offset of (row, col) when known

    def new_row() -> None:
        nonlocal row, col
        if col:
            row, col = row + 1, 0

    def label(r: int, text: str) -> None:
        while len(labels) <= r:
            labels.append("")
        if not labels[r]:
            labels[r] = text

    for f in fields:
        off, size = f.get("offset"), f.get("size")
        kinds = _kinds(f)
        variable = size is None or "repeat" in kinds or "compressed" in kinds \
            or "switch" in kinds
        if off is not None and known is not None and off != known:
            new_row()  # a gap we do not draw byte by byte
        if off is not None and col == 0:
            col = off % BYTES_PER_ROW
        boxes: list[_Box] = []
        if variable:
            new_row()
            h = ROW_H * (1.5 if "repeat" in kinds else 1.2)
            label(row, f"{off}" if off is not None else "+?")
            boxes.append(_Box(f["name"], LEFT, TOP + row * ROW_H, BYTES_PER_ROW * CELL, h))
            row += 2 if "repeat" in kinds else 1
            col = 0
            known = None
        elif size == 0:
            out.append((f, []))
            continue
        elif size > ELIDE:
            new_row()
            label(row, str(off) if off is not None else "+?")
            boxes.append(_Box(f["name"], LEFT, TOP + row * ROW_H, BYTES_PER_ROW * CELL,
                              ROW_H * ELIDE_ROWS))
            row += ELIDE_ROWS
            col = 0
            known = None if off is None else off + size
        else:
            left = size
            if col == 0:
                label(row, str(off) if off is not None else
                      (str(known) if known is not None else "+?"))
            while left > 0:
                take = min(left, BYTES_PER_ROW - col)
                boxes.append(_Box(f["name"], LEFT + col * CELL, TOP + row * ROW_H,
                                  take * CELL, ROW_H))
                left -= take
                col += take
                if col == BYTES_PER_ROW:
                    row, col = row + 1, 0
                    if left > 0:
                        base = off if off is not None else known
                        label(row, str(base + size - left) if base is not None else "")
            known = None if off is None else off + size
        out.append((f, boxes))
    rows = row + (1 if col else 0)
    while len(labels) < rows:
        labels.append("")
    return out, labels, rows


def _brackets(placed: list[tuple[dict, list[_Box]]]) -> list[tuple[str, float, float, str]]:
    """(text, y0, y1, colour) for checksum coverage and compressed regions."""
    spans: dict[str, tuple[float, float]] = {}
    for f, boxes in placed:
        if boxes:
            spans[f["name"]] = (min(b.y for b in boxes), max(b.y + b.h for b in boxes))
    out = []
    for f, _ in placed:
        ck = f.get("checksum")
        if ck:
            covered = [spans[n] for n in ck.get("covers", ()) if n in spans]
            if covered:
                out.append((f"{ck['algorithm']} → {f['name']}", min(a for a, _ in covered),
                            max(b for _, b in covered), "#7c3aed"))
        if "compressed" in _kinds(f) and f["name"] in spans:
            text = next(c["text"] for c in f["constraints"] if c["kind"] == "compressed")
            y0, y1 = spans[f["name"]]
            out.append((text, y0, y1, "#0f766e"))
    return out


def layout_svg(layout: dict, title: str, highlight: dict[str, str] | None = None,
               ident: str = "") -> str:
    """One layout (a ``docs`` model entry with ``fields``) as an SVG diagram."""
    highlight = highlight or {}
    placed, labels, rows = place(layout["fields"])
    brackets = _brackets(placed)
    width = LEFT + BYTES_PER_ROW * CELL + 12 + len(brackets) * BRACKET_W + (
        230 if brackets else 0)
    height = TOP + max(rows, 1) * ROW_H + 28
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bw-diagram" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'data-layout="{escape(ident)}" aria-label="byte diagram of {escape(title)}">',
             f"<title>{escape(title)}</title>",
             '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
             'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f1f5f9"/>'
             '<line x1="0" y1="0" x2="0" y2="6" stroke="#cbd5e1" stroke-width="2"/>'
             '</pattern></defs>',
             '<g font-family="ui-monospace, DejaVu Sans Mono, monospace" font-size="11">']
    for bit in range(BYTES_PER_ROW * 8):  # the bit axis, RFC style
        x = LEFT + bit * CELL / 8
        parts.append(f'<text x="{x + CELL / 16:.1f}" y="{TOP - 18}" text-anchor="middle" '
                     f'fill="#64748b" font-size="9">{bit % 10}</text>')
        if bit % 8 == 0:
            parts.append(f'<text x="{x + 2:.1f}" y="{TOP - 6}" fill="#334155">'
                         f"+{bit // 8}</text>")
    for r, text in enumerate(labels):
        parts.append(f'<text class="offset" x="{LEFT - 6}" y="{TOP + r * ROW_H + 21}" '
                     f'text-anchor="end" fill="#334155">{escape(text)}</text>')
    for i, (f, boxes) in enumerate(placed):
        kinds = _kinds(f)
        mark = highlight.get(f["name"])
        stroke, fill = MARKS.get(mark, ("#475569", PALETTE[i % len(PALETTE)]))
        if "condition" in kinds:
            fill = "url(#hatch)" if mark is None else fill
        dash = ' stroke-dasharray="6 3"' if f.get("size") is None or "repeat" in kinds \
            else ""
        size = f.get("size")
        what = f["name"]
        if "repeat" in kinds:
            what += "[…]"
        detail = f["type"] + (f", {size} B" if size is not None and size > ELIDE else "")
        if size is None:
            detail += ", variable"
        if mark:
            detail += f" — {mark}"
        for j, b in enumerate(boxes):
            if "repeat" in kinds:  # stacked: the items behind the first
                parts.append(f'<rect x="{b.x + 5}" y="{b.y + 5}" width="{b.w - 5}" '
                             f'height="{b.h - 5}" fill="#fff" stroke="{stroke}"{dash}/>')
            parts.append(f'<rect class="field" data-field="{escape(f["name"])}" '
                         f'x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h - (5 if "repeat" in kinds else 0)}" '
                         f'fill="{fill}" stroke="{stroke}" stroke-width="{2 if mark else 1}"{dash}>'
                         f"<title>{escape(f['name'])}: {escape(detail)}</title></rect>")
            if j == 0:
                two = b.h > ROW_H or (b.w >= 2 * CELL and size is not None and size > 2)
                ty = b.y + (15 if two else 21)
                parts.append(f'<text x="{b.x + b.w / 2}" y="{ty}" text-anchor="middle" '
                             f'fill="#0f172a">{escape(_short(what, b.w))}</text>')
                if two:
                    parts.append(f'<text x="{b.x + b.w / 2}" y="{ty + 13}" '
                                 f'text-anchor="middle" fill="#475569" font-size="10">'
                                 f"{escape(_short(detail, b.w))}</text>")
    x0 = LEFT + BYTES_PER_ROW * CELL + 10
    for k, (text, y0, y1, colour) in enumerate(brackets):
        x = x0 + k * BRACKET_W
        parts.append(f'<path class="bracket" d="M{x},{y0 + 2} h6 V{y1 - 2} h-6" '
                     f'fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{x0 + len(brackets) * BRACKET_W + 4}" '
                     f'y="{min(y0 + 12 + 13 * k, y1 + 13 * k)}" fill="{colour}" '
                     f'font-size="10">'
                     f"{escape(_short(text, 226))}</text>")
    parts.append(f'<text x="{LEFT}" y="{height - 8}" fill="#64748b" font-size="10">'
                 f"{escape(title)}</text>")
    parts.append("</g></svg>")
    return "".join(parts)


def changes(old: dict, new: dict) -> tuple[dict[str, str], dict[str, str]]:
    """Highlights for two layouts: removed in the old one; added, changed (type or size)
    and moved (offset) in the new one."""
    of = {f["name"]: f for f in old["fields"]}
    nf = {f["name"]: f for f in new["fields"]}
    old_marks = {n: "removed" for n in of if n not in nf}
    new_marks: dict[str, str] = {}
    for n, f in nf.items():
        o = of.get(n)
        if o is None:
            new_marks[n] = "added"
        elif (o["type"], o.get("size")) != (f["type"], f.get("size")):
            new_marks[n] = "changed"
        elif o.get("offset") != f.get("offset"):
            new_marks[n] = "moved"
    return old_marks, new_marks


def compare_svg(old: dict, new: dict, old_title: str, new_title: str, ident: str = "") -> str:
    """Two layouts side by side (HTML) with changed, added, moved and removed fields."""
    om, nm = changes(old, new)
    legend = " ".join(f'<span class="mark" style="border-color:{MARKS[k][0]};'
                      f'background:{MARKS[k][1]}">{k}</span>' for k in MARKS)
    return (f'<div class="compare" data-compare="{escape(ident)}">'
            f'<div class="legend">{legend}</div>'
            f'<div class="side">{layout_svg(old, old_title, om, ident + "-old")}</div>'
            f'<div class="side">{layout_svg(new, new_title, nm, ident + "-new")}</div>'
            "</div>")
