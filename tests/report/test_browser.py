"""The report in a real browser (headless Chromium): figures render, nothing errors, nothing
overflows the page, and a screenshot can be taken.

Chromium is driven from the command line: the test writes an instrumented copy of the report
whose first script records errors (uncaught, failed loads, ``console.error``) and whose last
script measures the page and writes the result into the DOM, which ``--dump-dom`` prints. The
report itself has no script.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from orthobench.report import build_report

pytestmark = pytest.mark.slow

BROWSER = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
    None,
)
WIDTH = 1280

RECORD_ERRORS = """<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(
  e.message || ("failed to load " + (e.target && (e.target.src || e.target.href)))), true);
const consoleError = console.error;
console.error = (...args) => { window.__errors.push(args.join(" ")); consoleError(...args); };
</script>"""

MEASURE = """<script>
window.addEventListener("load", () => {
  const page = document.documentElement.clientWidth;
  const images = [...document.images].map(i => ({src: i.src.slice(0, 40), width: i.naturalWidth}));
  const svgs = [...document.querySelectorAll("figure > svg")].map(
    s => s.getBoundingClientRect().width);
  const wide = [...document.body.querySelectorAll("*")]
    .filter(e => !e.closest(".scroll") || e.classList.contains("scroll"))
    .filter(e => e.getBoundingClientRect().right > page + 1)
    .map(e => e.tagName + "." + e.className);
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({page, scrollWidth: document.documentElement.scrollWidth,
                                    images, svgs, wide, errors: window.__errors});
  document.body.appendChild(out);
});
</script>"""


def _chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},1600",
         *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.skipif(
    BROWSER is None, reason="headless Chromium not found (Debian: apt-get install -y chromium)"
)
def test_the_report_renders_in_chromium_without_errors_or_overflow(demo_dir, tmp_path):
    report = build_report([demo_dir], tmp_path / "report.html")
    html = report.read_text()
    instrumented = tmp_path / "instrumented.html"
    instrumented.write_text(
        html.replace("<head>", "<head>" + RECORD_ERRORS, 1).replace("</body>", MEASURE + "</body>")
    )
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", instrumented.as_uri()).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    measured = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert measured["errors"] == []
    assert all(image["width"] > 0 for image in measured["images"]), measured["images"]
    assert len(measured["svgs"]) >= 8 and all(width > 0 for width in measured["svgs"])
    assert measured["wide"] == [] and measured["scrollWidth"] <= measured["page"]

    screenshot = tmp_path / "report.png"
    _chromium(f"--screenshot={screenshot}", "--hide-scrollbars", report.as_uri())
    assert screenshot.stat().st_size > 10_000
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(
    BROWSER is None, reason="headless Chromium not found (Debian: apt-get install -y chromium)"
)
def test_a_long_title_and_directory_name_wrap_instead_of_widening_the_page(tmp_path):
    """A 300-character title without a space (and as long a results folder) made the page
    about 5000 px wide: the heading and the "From" line did not wrap."""
    from .conftest import cell, write_cell

    root = tmp_path / ("r" * 200)
    write_cell(root, cell("s", "t", "sobol", 0, 2, 2), [4.0, 3.0, 2.0, 1.0])
    report = build_report([root], tmp_path / "report.html", "T" * 300)
    instrumented = tmp_path / "instrumented.html"
    instrumented.write_text(report.read_text().replace("</body>", MEASURE + "</body>"))
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", instrumented.as_uri()).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    measured = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert measured["scrollWidth"] <= measured["page"], measured
