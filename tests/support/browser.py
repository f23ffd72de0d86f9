"""A headless Chromium (Debian's /usr/bin/chromium through Playwright) that opens report
pages, waits for every chart to be drawn and keeps a screenshot of each."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from conftest import require

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = REPO / "build" / "test-output" / "reports"


@pytest.fixture(scope="module")
def browser():
    require(CHROMIUM.exists(), f"{CHROMIUM} missing: `apt-get install chromium` (scripts/setup.sh does)")
    from playwright.sync_api import sync_playwright
    profile = tempfile.mkdtemp(prefix="chaos-chromium-")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1300, "height": 900})
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


class Loaded:
    """A page opened in Chromium with its console errors collected."""

    def __init__(self, context, url: str, shot: str) -> None:
        self.errors: list[str] = []
        self.page = context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        response = self.page.goto(url)
        assert response is not None and response.status == 200, url
        self.page.wait_for_selector("body[data-charts-rendered]", timeout=60_000)
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{shot}.png"), full_page=True)

    def chart_points(self) -> dict[str, int]:
        """Per chart div: the number of data points plotly holds after drawing it."""
        return self.page.evaluate("""() => Object.fromEntries(
            Array.from(document.querySelectorAll('div.chart')).map(gd => [gd.id,
              (gd.data || []).reduce((n, t) => n + ((t.x || t.y || []).filter(v => v !== null).length), 0)]))""")
