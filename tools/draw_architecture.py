"""Draw docs/architecture.svg from its text source, docs/architecture.diagram.

    python tools/draw_architecture.py           # rewrite the SVG from the source
    python tools/draw_architecture.py --check   # exit 1 if the SVG is not the source's drawing

Graphviz is not installed on the project's machines and the picture is small, so this script
lays nothing out: the source places every box, and the script draws boxes, frames and arrows
with the standard library only. One statement per line (shell-style quoting), `#` comments:

    canvas WIDTH HEIGHT "title"
    group X Y W H "label" [CORNER]            a dashed frame behind the boxes, its label at
                                              CORNER: top-left (the default) or bottom-right
    box ID X Y W H KIND "title" "line" ...    KIND: client, leader, controller, broker, disk, tool
    edge FROM TO STYLE ["label"]              STYLE: solid, dashed, both (arrow heads at both ends)

An edge runs between the two boxes' centres, cut at their borders; its label sits at the middle.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "docs" / "architecture.diagram"
TARGET = ROOT / "docs" / "architecture.svg"

# Fill and stroke per kind of box: people and tools outside, the quorum, the brokers, files.
KINDS = {
    "client": ("#f4f4f4", "#666666"),
    "leader": ("#dbe9f9", "#1f5fa8"),
    "controller": ("#eef4fc", "#1f5fa8"),
    "broker": ("#e6f4ea", "#2e7d32"),
    "disk": ("#fff6e0", "#a36b00"),
    "tool": ("#f3e8fb", "#6a1b9a"),
}
STYLES = ("solid", "dashed", "both")
CORNERS = ("top-left", "bottom-right")  # where a frame's label goes: out of the arrows' way
CHAR_WIDTH = 6.6  # px per character at the label font size (12 px sans-serif), for backgrounds


class DiagramError(ValueError):
    """A statement the script cannot draw, with its line number."""


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float
    kind: str
    lines: tuple[str, ...]

    @property
    def centre(self) -> tuple[float, float]:
        return self.x + self.w / 2, self.y + self.h / 2

    def border_towards(self, tx: float, ty: float) -> tuple[float, float]:
        """Where the line from the centre to (tx, ty) leaves this box."""
        cx, cy = self.centre
        dx, dy = tx - cx, ty - cy
        if dx == 0 and dy == 0:
            return cx, cy
        scale = min(self.w / 2 / abs(dx) if dx else float("inf"),
                    self.h / 2 / abs(dy) if dy else float("inf"))
        return cx + dx * scale, cy + dy * scale


@dataclass(frozen=True)
class Diagram:
    width: int
    height: int
    title: str
    groups: tuple[tuple[float, float, float, float, str, str], ...]
    boxes: dict[str, Box]
    edges: tuple[tuple[str, str, str, str], ...]


def number(word: str, line: int) -> float:
    try:
        return float(word)
    except ValueError:
        raise DiagramError(f"line {line}: {word!r} is not a number") from None


def parse(text: str) -> Diagram:
    size: tuple[int, int, str] | None = None
    groups: list[tuple[float, float, float, float, str, str]] = []
    boxes: dict[str, Box] = {}
    edges: list[tuple[str, str, str, str]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        words = shlex.split(raw, comments=True)
        if not words:
            continue
        verb, args = words[0], words[1:]
        if verb == "canvas" and len(args) == 3:
            size = (int(number(args[0], n)), int(number(args[1], n)), args[2])
        elif verb == "group" and len(args) in (5, 6):
            corner = args[5] if len(args) == 6 else "top-left"
            if corner not in CORNERS:
                raise DiagramError(f"line {n}: corner {corner!r} is not one of "
                                   f"{', '.join(CORNERS)}")
            x, y, w, h = (number(a, n) for a in args[:4])
            groups.append((x, y, w, h, args[4], corner))
        elif verb == "box" and len(args) >= 7:
            if args[5] not in KINDS:
                raise DiagramError(f"line {n}: kind {args[5]!r} is not one of {', '.join(KINDS)}")
            x, y, w, h = (number(a, n) for a in args[1:5])
            boxes[args[0]] = Box(x, y, w, h, args[5], tuple(args[6:]))
        elif verb == "edge" and len(args) in (3, 4):
            if args[2] not in STYLES:
                raise DiagramError(f"line {n}: style {args[2]!r} is not one of {', '.join(STYLES)}")
            missing = [b for b in args[:2] if b not in boxes]
            if missing:
                raise DiagramError(f"line {n}: no box {missing[0]!r} declared above")
            edges.append((args[0], args[1], args[2], args[3] if len(args) == 4 else ""))
        else:
            raise DiagramError(f"line {n}: cannot read {raw.strip()!r}")
    if size is None:
        raise DiagramError("no canvas line")
    return Diagram(size[0], size[1], size[2], tuple(groups), boxes, tuple(edges))


def text_element(x: float, y: float, content: str, size: int, weight: str = "normal",
                 anchor: str = "middle") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" '
            f'text-anchor="{anchor}">{escape(content)}</text>')


def draw_box(box: Box) -> list[str]:
    fill, stroke = KINDS[box.kind]
    out = [f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
           f'rx="8" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>']
    cx = box.x + box.w / 2
    top = box.y + box.h / 2 - 8 * (len(box.lines) - 1) + 5  # lines 16 px apart, centred
    for i, line in enumerate(box.lines):
        out.append(text_element(cx, top + 16 * i, line, 14 if i == 0 else 12,
                                "bold" if i == 0 else "normal"))
    return out


def draw_edge(diagram: Diagram, source: str, target: str, style: str, label: str) -> list[str]:
    a, b = diagram.boxes[source], diagram.boxes[target]
    x1, y1 = a.border_towards(*b.centre)
    x2, y2 = b.border_towards(*a.centre)
    dash = ' stroke-dasharray="6 4"' if style == "dashed" else ""
    start = ' marker-start="url(#head)"' if style == "both" else ""
    out = [f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#444" '
           f'stroke-width="1.4"{dash}{start} marker-end="url(#head)"/>']
    if label:
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        half = len(label) * CHAR_WIDTH / 2 + 4
        out.append(f'<rect x="{mx - half:.1f}" y="{my - 10:.1f}" width="{2 * half:.1f}" '
                   f'height="18" rx="3" fill="#ffffff" fill-opacity="0.92"/>')
        out.append(text_element(mx, my + 4, label, 12))
    return out


def render(diagram: Diagram) -> str:
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{diagram.width}" '
           f'height="{diagram.height}" viewBox="0 0 {diagram.width} {diagram.height}" '
           'font-family="Helvetica, Arial, sans-serif" fill="#1a1a1a">',
           f"<title>{escape(diagram.title)}</title>",
           '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
           'markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#444"/></marker></defs>',
           f'<rect width="{diagram.width}" height="{diagram.height}" fill="#ffffff"/>',
           text_element(20, 28, diagram.title, 16, "bold", "start")]
    for x, y, w, h, label, corner in diagram.groups:
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="12" '
                   'fill="none" stroke="#888" stroke-width="1.2" stroke-dasharray="8 5"/>')
        if corner == "top-left":
            out.append(text_element(x + 14, y + 20, label, 13, "bold", "start"))
        else:
            out.append(text_element(x + w - 14, y + h - 10, label, 13, "bold", "end"))
    for box in diagram.boxes.values():
        out += draw_box(box)
    for edge in diagram.edges:  # arrows over the boxes, so a label is never hidden
        out += draw_edge(diagram, *edge)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    try:
        svg = render(parse(SOURCE.read_text(encoding="utf-8")))
    except DiagramError as error:
        print(f"{SOURCE.name}: {error}", file=sys.stderr)
        return 1
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != svg:
            print(f"{TARGET.name} is not {SOURCE.name}'s drawing: run "
                  "python tools/draw_architecture.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(svg, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
