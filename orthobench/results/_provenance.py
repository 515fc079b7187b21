"""Provenance of a results file: package versions, git SHA, host, CPU and device.

:func:`run_metadata` is stored with every file; :func:`code_version` labels the code that wrote
one (or the running code) as ``"<version> (git <sha>)"``.
"""

from __future__ import annotations

import functools
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


#: The directory of the orthobench package (``.../orthobench``).
_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _git(package_dir: Path, *args: str) -> str | None:
    """The output of ``git args`` run in ``package_dir``, or None where git fails or is missing."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=package_dir, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _git_sha(package_dir: Path = _PACKAGE_DIR) -> str | None:
    """The commit checked out where the package is imported from, with ``-dirty`` appended where
    the package's files differ from it (edited, added or removed, as ``git describe --dirty``
    marks a tree): values from edited code are not that commit's. None when it is not a git
    checkout of the package: a package installed into a folder that lies inside another
    repository (a virtual environment in a user's project) is not that repository's code, so
    its HEAD is not reported. ``HEAD:./__init__.py`` resolves only where the package's own
    ``__init__.py`` is committed at that path."""
    out = _git(package_dir, "rev-parse", "HEAD", "HEAD:./__init__.py")
    if not out:
        return None
    sha = out.split()[0]
    return f"{sha}-dirty" if _git(package_dir, "status", "--porcelain", "--", ".") else sha


def short_sha(sha: str, length: int = 12) -> str:
    """A :func:`_git_sha` label's first ``length`` hex digits, with its ``-dirty`` mark."""
    commit, dirty, _ = sha.partition("-dirty")
    return commit[:length] + dirty


@functools.cache  # the machine's: read once per process, not once per stored unit
def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``, else :func:`platform.processor`)."""
    cpuinfo = Path("/proc/cpuinfo")
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        lines = []
    model = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), "")
    return model or platform.processor() or "unknown CPU"


def cpu_description() -> str:
    """The CPU's model and the instruction set torch's CPU kernels dispatch to on it
    (``"AMD EPYC 7B13; AVX2"``): with the thread count, what BO paths and probe values depend on
    besides the code and the library versions (docs/design.md, "Seeds and determinism")."""
    import torch  # here: reading provenance alone needs no torch

    return f"{cpu_model()}; {torch.backends.cpu.get_cpu_capability()}"


def where_run(device: str = "cpu") -> dict[str, str]:
    """The host and CPU (:func:`cpu_description`) of this process, and on a CUDA ``device`` the
    GPU's name: stored with a unit's records from the process that computed them, a worker of
    another machine included."""
    import torch

    where = {"host": platform.node(), "cpu": cpu_description()}
    # Provenance never fails a unit: a job named for CUDA that never touched it (the executors'
    # tests run such jobs on CPU-only torch) records no GPU.
    if device.startswith("cuda") and torch.cuda.is_available():
        where["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return where


def run_metadata(device: str) -> dict[str, Any]:
    """Versions (of orthobench and the libraries its values depend on), git SHA, host, CPU and
    device: stored with every results file (host and CPU are replaced by those of the process
    that ran the unit, :func:`where_run`, which names the GPU too: not asked here, where it would
    start CUDA in a runner whose cells compute elsewhere)."""
    return {
        # numpy draws every seeded random number and scipy the Sobol' points and the GP fits'
        # optimizer: their versions change values as torch's do.
        "versions": {
            d: _version(d)
            for d in ("orthobench", "torch", "botorch", "gpytorch", "optuna", "numpy", "scipy")
        },
        "python": platform.python_version(),
        "git_sha": _git_sha(),
        **where_run(),
        "device": device,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def code_version(metadata: Mapping[str, Any] | None = None) -> str:
    """The orthobench version and git SHA of :func:`run_metadata` output, as one label.

    ``"0.1.0 (git 1a2b3c4d5e6f)"`` (``"... (git 1a2b3c4d5e6f-dirty)"`` from edited code), or the
    version alone outside a git checkout, or ``"unknown"``; ``metadata=None`` gives the running
    code's label.
    """
    if metadata is None:
        metadata = {"versions": {"orthobench": _version("orthobench")}, "git_sha": _git_sha()}
    release = (metadata.get("versions") or {}).get("orthobench") or "unknown"
    sha = metadata.get("git_sha")
    return f"{release} (git {short_sha(sha)})" if sha else release
