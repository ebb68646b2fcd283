"""The SVG charts: well-formed XML with the expected series and bars, escaped text, round ticks;
rendered to PNG where a converter is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tvmc.driver.svg import bar_charts, line_chart, nice_ticks

NS = {"svg": "http://www.w3.org/2000/svg"}
NASTY = "conv <&> \"q\" 's'"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg.encode())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iterfind(".//svg:text", NS)]


def test_line_chart_has_a_series_and_a_legend_entry_per_name():
    series = {"a": [(1.0, 2.0), (3.0, 5.0), (10.0, 5.0)], NASTY: [(1.0, 1.0), (4.0, 1.5)]}
    root = parse(line_chart("title <x>", "trial", "GFLOP/s", series))
    paths = root.findall(".//svg:path[@class='series']", NS)
    assert [p.get("data-series") for p in paths] == ["a", NASTY]
    assert paths[0].get("d").startswith("M") and paths[0].get("d").count("H") == 2
    legend = [t.text for t in root.iterfind(".//svg:text[@class='legend']", NS)]
    assert legend == ["a", NASTY]
    assert {"title <x>", "trial", "GFLOP/s"} <= set(texts(root))
    assert root.find("svg:title", NS).text == "title <x>"


def test_bar_charts_draw_each_bar_longest_for_the_largest_value():
    bars = [("/conv/Conv (Conv+Relu)", 3.0), (NASTY, 1.0), ("tiny", 0.0)]
    root = parse(
        bar_charts("profile", [("per node", "ms", bars), ("per op", "ms", [("Conv", 4.0)])])
    )
    rects = root.findall(".//svg:rect[@class='bar']", NS)
    assert [r.get("data-label") for r in rects] == [n for n, _ in bars] + ["Conv"]
    widths = [float(r.get("width")) for r in rects[:3]]
    assert widths[0] == pytest.approx(3 * widths[1], rel=0.01) and widths[2] < 1
    assert "3 (75.0%)" in texts(root) and NASTY in texts(root)


@pytest.mark.parametrize("low, high", [(0, 1), (0, 7.3), (0, 1234), (3, 3), (0.0, 0.004)])
def test_ticks_are_round_and_cover_the_range(low, high):
    ticks = nice_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high and 3 <= len(ticks) <= 12
    step = ticks[1] - ticks[0]
    assert all(b - a == pytest.approx(step) for a, b in zip(ticks, ticks[1:]))
    assert f"{step:.1e}"[0] in "125"


def converter() -> list[str] | None:
    """A command turning IN.svg into OUT.png, from what is installed (a stand-in `convert` that
    cannot read SVG does not count)."""
    if shutil.which("rsvg-convert"):
        return ["rsvg-convert", "{svg}", "-o", "{png}"]
    if shutil.which("inkscape"):
        return ["inkscape", "{svg}", "--export-filename={png}"]
    try:
        import cairosvg  # noqa: F401

        return [sys.executable, "-c", "import cairosvg,sys; cairosvg.svg2png(url=sys.argv[1], "
                "write_to=sys.argv[2])", "{svg}", "{png}"]  # fmt: skip
    except ImportError:
        pass
    if shutil.which("convert"):
        return ["convert", "{svg}", "{png}"]
    return None


def test_charts_render_to_png(tmp_path: Path):
    command = converter()
    if command is None:
        pytest.skip("no SVG converter (rsvg-convert, inkscape, cairosvg, ImageMagick)")
    charts = {
        "line": line_chart("t", "x", "y", {NASTY: [(1.0, 1.0), (5.0, 3.0)]}),
        "bars": bar_charts("t", [("p", "ms", [(NASTY, 2.0), ("b", 1.0)])]),
    }
    for name, svg in charts.items():
        source, png = tmp_path / f"{name}.svg", tmp_path / f"{name}.png"
        source.write_text(svg, encoding="utf-8")
        args = [a.format(svg=source, png=png) for a in command]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60)
        if done.returncode and command[0] == "convert":
            pytest.skip(f"`convert` cannot render SVG here: {done.stderr.strip()[:100]}")
        assert done.returncode == 0, done.stderr
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
        width = int.from_bytes(data[16:20], "big")  # the IHDR chunk: the SVG's width in px
        assert width == int(parse(svg).get("width"))
