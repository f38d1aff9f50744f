"""The dark theme in a real headless Chromium whose system preference is dark
(prefers-color-scheme, Playwright's color_scheme): static/style.css's dark colours on the page,
static/theme.js's on every chart (paper, plot, font, grid) with the data's colours untouched,
after Dash draws a figure anew and when the preference changes, without a relayout loop; and
axe-core's WCAG A/AA rules (tests/browser/test_accessibility.py) passing in the dark too. One
server for the module over the demo's four weeks at production volume (Seasonal has its two
windows there)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from app.dashboard.speedups import prefetched
from tests.browser.test_accessibility import DRAWN, axe_js  # noqa: F401  (fixture)
from tests.support.axe import serious_violations
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER

PAGES = {
    "/": "overview",
    "/latency": "latency",
    "/rightsizing?engine=llm-70b": "rightsizing",
    "/seasonal?engine=llm-70b&weeks=4": "seasonal",
}
# Known, not the theme's: Dash 4.4.1's dcc.Dropdown renders a focusable input with
# aria-hidden=true (the Rightsizing profile editor's dropdowns; see KNOWN["/admin"] in
# tests/browser/test_accessibility.py). Only those nodes are let through.
KNOWN_NODES = {("aria-hidden-focus", "dash-dropdown-focus-target")}
PAPER = "#181d27"  # static/theme.js DARK.paper, the cards' dark surface
FONT = "#e6e9ef"

# Every chart in the page's main region, once it has its dark paper (theme.js ran).
THEMED = """paper => {
    const gds = [...document.querySelectorAll('main .js-plotly-plot')];
    return gds.length > 0 && gds.every(g => g.layout && g.layout.paper_bgcolor === paper);
}"""
# Per chart: its layout colours as drawn (plotly's full layout) and its data as given.
CHARTS = """() => [...document.querySelectorAll('main .js-plotly-plot')].map(gd => {
    const full = gd._fullLayout;
    const axes = Object.keys(full).filter(k => /^[xy]axis\\d*$/.test(k));
    return {
        id: (gd.closest('[id]') || {}).id,
        paper: full.paper_bgcolor, plot: full.plot_bgcolor, font: full.font.color,
        grid: axes.map(a => full[a].gridcolor),
        data: JSON.stringify(gd.data.map(t => [t.marker, t.line, t.colorscale, t.fillcolor])),
        shapes: JSON.stringify((gd.layout.shapes || []).map(s => s.line)),
    };
})"""


@pytest.fixture(scope="module")
def dark_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over the demo's four weeks at a 0.1% sample (the Seasonal page test's template)."""
    template = demo_template(requests=66_000, days=28, end=None, sample_rate=0.001)
    db = copy_database(template, tmp_path_factory.mktemp("dark-live") / "d.duckdb")
    yield from serve(server_settings(db), wait=False)


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    prefetched.reset()


def _open(browser, url: str, scheme: str = "dark"):
    page = browser.new_page(viewport={"width": 1366, "height": 900}, color_scheme=scheme)
    errors = console_errors(page)
    page.goto(url, wait_until="load")
    page.wait_for_function(DRAWN, timeout=120_000, polling=200)
    return page, errors


def _part(page, tmp_path, selector: str, name: str) -> None:
    """A screenshot of one element (to TOKENSHAPE_SCREENSHOTS too, when set)."""
    for folder in (str(tmp_path), os.environ.get("TOKENSHAPE_SCREENSHOTS")):
        if folder:
            page.locator(selector).screenshot(path=os.path.join(folder, f"{name}.png"))


def _themed(page, paper: str = PAPER) -> None:
    page.wait_for_function(THEMED, arg=paper, timeout=30_000, polling=100)


@pytest.mark.parametrize("path", list(PAGES), ids=list(PAGES.values()))
def test_each_page_is_dark_and_passes_axe(dark_live, browser, axe_js, path, tmp_path):  # noqa: F811
    page, errors = _open(browser, dark_live.url + path)
    _themed(page)
    screenshot(page, tmp_path, f"dark-{PAGES[path]}")
    if PAGES[path] == "seasonal":
        for part in ("#seasonal-matrix", "#seasonal-windows", "#seasonal-replicas"):
            _part(page, tmp_path, part, f"dark-{part.strip('#')}")
    body = page.evaluate(
        "() => { const s = getComputedStyle(document.body); return [s.backgroundColor, s.color]; }"
    )
    assert body == ["rgb(15, 19, 26)", "rgb(230, 233, 239)"]  # --bg and --ink of the dark theme
    card = page.locator(".card").first
    assert card.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(24, 29, 39)"
    charts = page.evaluate(CHARTS)
    for c in charts:
        assert (c["paper"], c["plot"], c["font"]) == (PAPER, PAPER, FONT), c["id"]
        assert set(c["grid"]) <= {"#343c4d", None}, c["id"]  # None: a chart with no grid
    found = serious_violations(page, axe_js, KNOWN_NODES)
    assert found == [], "\n".join(found)
    assert errors == []


def test_data_colours_are_the_light_themes(dark_live, browser, tmp_path):
    """Only the chart's frame changes: every trace's and outline's colours are the light page's."""
    url = dark_live.url + "/seasonal?engine=llm-70b&weeks=4"
    light, _ = _open(browser, url, "light")
    light.wait_for_timeout(300)  # theme.js would have run by now (it must do nothing)
    dark, _ = _open(browser, url, "dark")
    _themed(dark)
    for part in ("#seasonal-matrix", "#seasonal-windows"):
        _part(light, tmp_path, part, f"light-{part.strip('#')}")
    lit, dim = light.evaluate(CHARTS), dark.evaluate(CHARTS)
    assert [c["id"] for c in lit] == [c["id"] for c in dim] and len(lit) >= 4
    assert PAPER not in {c["paper"] for c in lit}  # the light theme keeps the figures' own
    for a, b in zip(lit, dim, strict=True):
        assert (a["data"], a["shapes"]) == (b["data"], b["shapes"]), a["id"]


def _settled(page) -> None:
    """Wait until a second passes without any chart drawing (Dash's autosize relayout after
    mount is one draw per chart); a relayout loop never settles."""
    for _ in range(10):
        page.evaluate("() => { window.__draws = 0; }")
        page.wait_for_timeout(1000)
        if page.evaluate("() => window.__draws") == 0:
            return
    pytest.fail(f"the charts kept drawing: {page.evaluate('() => window.__draws')} a second")


def test_no_relayout_loop_and_a_redraw_is_themed_again(dark_live, browser):
    page, errors = _open(browser, dark_live.url + "/latency")
    _themed(page)
    # Count every chart's draws from now on: once themed, theme.js leaves them alone.
    page.evaluate(
        """() => { window.__draws = 0;
            document.querySelectorAll('main .js-plotly-plot').forEach(gd =>
                gd.on('plotly_afterplot', () => window.__draws++)); }"""
    )
    _settled(page)
    # Dash drawing a figure anew (Plotly.react with the server's light layout): dark again,
    # and then the drawing stops.
    page.evaluate(
        """() => { const gd = document.querySelector('main .js-plotly-plot');
            const layout = Object.assign({}, gd.layout, {paper_bgcolor: '#ffffff',
                plot_bgcolor: '#ffffff', font: {color: '#2a3f5f'}});
            window.__draws = 0;
            return window.Plotly.react(gd, gd.data, layout); }"""
    )
    _themed(page)
    _settled(page)
    assert page.evaluate(CHARTS)[0]["font"] == FONT
    assert errors == []


def test_the_charts_follow_the_preference_as_it_changes(dark_live, browser, tmp_path):
    page, errors = _open(browser, dark_live.url + "/", "light")
    page.wait_for_timeout(300)
    before = page.evaluate(CHARTS)
    assert before and PAPER not in {c["paper"] for c in before}
    page.emulate_media(color_scheme="dark")
    _themed(page)
    page.emulate_media(color_scheme="light")
    page.wait_for_function(
        "paper => [...document.querySelectorAll('main .js-plotly-plot')].every(g => "
        "g.layout.paper_bgcolor !== paper)",
        arg=PAPER,
        timeout=30_000,
        polling=100,
    )
    after = page.evaluate(CHARTS)
    # Back to the figures' own colours, grid and font included.
    assert after == before
    screenshot(page, tmp_path, "light-overview-after-dark")
    assert errors == []
