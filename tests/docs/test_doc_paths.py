"""Every file of the repository that the README, docs/, the suites and the benchmark scripts name
by its path exists: a renamed script or suite leaves no command in them that cannot run. (A
file of an earlier commit is named without its folder.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: A repository path as the pages write it: a top folder, then a file of a known kind.
REPO_PATH = re.compile(
    r"\b(?:suites|benchmarks|docs|tests|orthobench)/[\w./-]+\.(?:yaml|py|md|csv|sh|json)\b"
)
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "suites").rglob("*.yaml")),
    *sorted((ROOT / "benchmarks").glob("*.py")),
    *sorted((ROOT / "benchmarks").glob("*.sh")),
]


def test_the_pattern_finds_the_paths_a_page_writes():
    text = "run `python benchmarks/step_benchmark.py` on suites/paper/probe-full.yaml (docs/x.md)."
    assert REPO_PATH.findall(text) == [
        "benchmarks/step_benchmark.py",
        "suites/paper/probe-full.yaml",
        "docs/x.md",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_exists(page: Path):
    missing = sorted({p for p in REPO_PATH.findall(page.read_text()) if not (ROOT / p).exists()})
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {missing}"
