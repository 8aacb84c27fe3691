"""tools/draw_architecture.py: README's picture is drawn from docs/architecture.diagram, and the
committed SVG is that source's drawing (issue 32 item 5)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "draw_architecture.py"


def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("draw_architecture", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def test_the_committed_svg_is_the_sources_drawing() -> None:
    assert tool().main(["--check"]) == 0


def test_an_edge_ends_on_the_borders_of_its_boxes() -> None:
    module = tool()
    diagram = module.parse('canvas 400 300 "t"\n'
                           'box a 0 0 100 50 client "A"\n'
                           'box b 200 200 100 50 disk "B" "second line"\n'
                           'edge a b dashed "reads"\n')
    svg = module.render(diagram)
    # a's centre (50, 25) towards b's (250, 225): leaves a at its bottom, y = 50, x = 75.
    assert '<line x1="75.0" y1="50.0" x2="225.0" y2="200.0"' in svg
    assert 'stroke-dasharray="6 4"' in svg and ">reads</text>" in svg
    assert ">second line</text>" in svg and svg.startswith("<svg ")


@pytest.mark.parametrize(("source", "message"), [
    ('canvas 10 10 "t"\nbox a 0 0 1 1 cloud "A"\n', "line 2: kind 'cloud'"),
    ('canvas 10 10 "t"\nbox a 0 0 1 1 disk "A"\nedge a b solid\n', "line 3: no box 'b'"),
    ('canvas 10 10 "t"\nbox a 0 zero 1 1 disk "A"\n', "line 2: 'zero' is not a number"),
    ('box a 0 0 1 1 disk "A"\n', "no canvas line"),
])
def test_a_statement_it_cannot_draw_names_its_line(source: str, message: str) -> None:
    module = tool()
    with pytest.raises(module.DiagramError, match=message):
        module.parse(source)
