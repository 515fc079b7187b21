"""The documentation's code runs: each tutorial page, the README's Python API, the Sphinx site.

A page's ```` ```python ```` blocks run in order as one script, in a fresh namespace and in an
empty working directory, so the files a page writes land in ``tmp_path``. The script keeps each
block at its line of the page (the lines between are blank), so a traceback names the page's
line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TUTORIALS = sorted(p for p in (DOCS / "tutorials").glob("*.md") if p.name != "index.md")

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\n`]*)$")


def python_script(text: str, section: str | None = None) -> str:
    """The ```` ```python ```` blocks of markdown ``text`` as one script, each block at its own
    line numbers (blank lines elsewhere).

    Args:
        section: Only the blocks under the heading of this title (up to the next heading of the
            same or a higher level); all blocks when None.
    """
    lines = text.splitlines()
    script = [""] * len(lines)
    in_section = section is None
    level = 0
    fence: str | None = None
    keep = False
    for i, line in enumerate(lines):
        if fence is None:
            heading = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
            if heading and section is not None:
                depth = len(heading.group(1))
                if heading.group(2) == section:
                    in_section, level = True, depth
                elif in_section and depth <= level:
                    in_section = False
                continue
            match = _FENCE.match(line)
            if match:
                fence = match.group("fence")
                keep = in_section and match.group("info").strip().split(" ")[0] == "python"
        elif line.strip() == fence or (line.strip().startswith(fence) and not line.strip(fence[0])):
            fence = None
        elif keep:
            script[i] = line
    return "\n".join(script) + "\n"


def run_script(script: str, filename: Path) -> dict:
    """Execute ``script`` (compiled as ``filename``) in a fresh ``__main__`` namespace."""
    assert script.strip(), f"{filename} has no python blocks to run"
    namespace = {"__name__": "__main__", "__file__": str(filename)}
    exec(compile(script, str(filename), "exec"), namespace)
    return namespace


def test_python_script_keeps_only_python_blocks_at_their_lines():
    text = (
        "# Page\n```python\nx = 1\n```\n\n```bash\nls\n```\n"
        "## Other\n````python\ny = 2\n````\n## Python API\n```python\nz = 3\n```\n"
    )
    script = python_script(text)
    assert script.splitlines()[2] == "x = 1" and script.splitlines()[10] == "y = 2"
    assert "ls" not in script
    assert python_script(text, "Python API").split() == ["z", "=", "3"]
    assert python_script(text, "Missing").strip() == ""


@pytest.mark.slow
@pytest.mark.parametrize("page", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    run_script(python_script(page.read_text()), page)


def test_readme_python_api_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    readme = ROOT / "README.md"
    monkeypatch.chdir(tmp_path)
    namespace = run_script(python_script(readme.read_text(), "Python API"), readme)
    assert (tmp_path / "results" / "tiny" / "report.html").exists()
    assert namespace["result"].ok == 4


@pytest.mark.slow
def test_sphinx_builds_the_site(tmp_path: Path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-E", "-q", "-b", "html"]
        + ["-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (out / "index.html").exists() and (out / "quickstart.html").exists()
    api = (out / "api.html").read_text()
    for name in ("run_suite", "load_results", "RunResult", "load_suite", "RunRecord"):
        assert name in api, name
