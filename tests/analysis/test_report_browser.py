"""The HTML report rendered by a real headless Chromium (Debian's ``chromium``; ``.ci/run``
installs it): what the page draws, in the DOM after parsing and in the screenshot's pixels."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from openmsprof.analysis.report_html import CSP, write_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium is not installed (.ci/run installs it)")


def _chromium(tmp: Path, *args: str) -> str:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--no-first-run",
           f"--user-data-dir={tmp / 'profile'}", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return r.stdout


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.meta: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [v or "" for k, v in attrs if k in ("src", "href", "xlink:href")]
        if tag == "meta":
            self.meta.append(dict(attrs))


@pytest.fixture(scope="module")
def report(jobs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "mish.html"
    return write_html(jobs["mish"], path, base=jobs["leakyrelu"])


def test_self_contained(report: Path) -> None:
    raw = report.read_text()
    p = _Refs()
    p.feed(raw)
    assert p.refs and all(r.startswith("#") for r in p.refs)  # only in-page links
    assert not re.search(r"(src|href)\s*=\s*[\"']?\s*(https?:)?//", raw)
    assert {"http-equiv": "Content-Security-Policy", "content": CSP} in p.meta
    assert CSP.startswith("default-src 'none'") and "<script" not in raw


def test_dom_draws_pictures_first(report: Path, tmp_path: Path) -> None:
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    # the charts come before the findings, in reading order
    order = [dom.index(k) for k in ('id="roofline"', 'class="series"', 'id="top-ops"',
                                    'class="waterfall"', 'id="findings"')]
    assert order == sorted(order)
    roof = dom[dom.index('class="roofline"'):dom.index("</svg>", dom.index('class="roofline"'))]
    points = re.findall(r'<circle class="op" cx="([\d.]+)" cy="([\d.]+)" r="([\d.]+)"', roof)
    assert len(points) >= 5 and 'class="ceiling"' in roof
    assert "GEMM peak" in roof and "DRAM" in roof and "Softplus" in roof
    assert 'class="p50"' in dom and 'class="p95"' in dom
    assert dom.count('class="wf"') >= 4
    cards = dom.count('class="card finding"')
    assert cards >= 2 and dom.count("<details id=\"ev") == cards
    first = dom.index('class="card finding"')
    assert "decomposed Mish" in dom[first:dom.index("</div>", first)]  # the top card
    assert 'href="#ev0"' in dom and 'id="ev0"' in dom


def _pixels(png: Path) -> tuple[int, int, list[tuple[int, int, int]]]:
    from PIL import Image

    img = Image.open(png).convert("RGB")
    return img.width, img.height, list(img.get_flattened_data()) if hasattr(img, "get_flattened_data") else list(img.getdata())


def test_screenshot_shows_the_charts(report: Path, tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2600",
              "--hide-scrollbars", report.as_uri())
    w, h, px = _pixels(shot)
    assert (w, h) == (1200, 2600)

    def rows_with(color: tuple[int, int, int]) -> list[int]:
        return sorted({i // w for i, p in enumerate(px) if p == color})

    bars = rows_with((0x2B, 0x6C, 0xB0))  # op bars / memory-bound points
    red = rows_with((0xB0, 0x00, 0x20))  # slower waterfall steps, critical card border
    green = rows_with((0x2F, 0x85, 0x5A))  # the p50 line, faster waterfall steps
    assert len(bars) > 100 and len(red) > 10 and len(green) >= 2
    dark = rows_with((0x22, 0x22, 0x22))  # the roofline's ceiling (and text)
    assert dark and min(dark) < h // 3  # the roofline is drawn near the top of the page
    non_white = sum(1 for p in px[: w * (h // 3)] if p != (255, 255, 255))
    assert non_white > 0.02 * w * (h // 3)  # the top third is a picture, not an empty page
