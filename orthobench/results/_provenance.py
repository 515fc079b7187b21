"""Provenance of a results file: package versions, git SHA, host and device.

:func:`run_metadata` is stored with every file; :func:`code_version` labels the code that wrote
one (or the running code) as ``"<version> (git <sha>)"``.
"""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def run_metadata(device: str) -> dict[str, Any]:
    """Versions, git SHA, host and device: stored with every results file."""
    return {
        "versions": {
            d: _version(d) for d in ("orthobench", "torch", "botorch", "gpytorch", "optuna")
        },
        "python": platform.python_version(),
        "git_sha": _git_sha(),
        "host": platform.node(),
        "device": device,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def code_version(metadata: Mapping[str, Any] | None = None) -> str:
    """The orthobench version and git SHA of :func:`run_metadata` output, as one label.

    ``"0.1.0 (git 1a2b3c4d5e6f)"``, or the version alone outside a git checkout, or
    ``"unknown"``; ``metadata=None`` gives the running code's label.
    """
    if metadata is None:
        metadata = {"versions": {"orthobench": _version("orthobench")}, "git_sha": _git_sha()}
    release = (metadata.get("versions") or {}).get("orthobench") or "unknown"
    sha = metadata.get("git_sha")
    return f"{release} (git {sha[:12]})" if sha else release
