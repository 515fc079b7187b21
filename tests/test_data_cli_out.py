"""``orthobench data convert-wm811k --out PATH``: a PATH nothing can be written to is refused
before the source is unpickled (minutes for the public 2 GB file), naming ``--out``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orthobench.exceptions import OrthobenchError
from orthobench.tasks.datasets import wm811k
from orthobench.tasks.datasets.synthetic_wafers import write_lswmd_pickle
from tests.test_data_cli import _error_lines, invoke


@pytest.fixture(scope="module")
def lswmd(tmp_path_factory) -> Path:
    """A small valid LSWMD.pkl (5 labelled maps per class)."""
    return write_lswmd_pickle(
        tmp_path_factory.mktemp("lswmd") / "LSWMD.pkl", n_per_class=5, n_unlabelled=0, seed=1
    )


@pytest.fixture
def no_unpickling(monkeypatch):
    """Fail the test if the source is unpickled: the refusal must come first."""

    def unpickle(path):
        raise AssertionError(f"{path} was unpickled before --out was checked")

    monkeypatch.setattr(wm811k, "_unpickle", unpickle)


_PROC = pytest.mark.skipif(not os.path.isdir("/proc"), reason="no /proc to be unwritable")


@pytest.mark.parametrize(
    ("out", "reason"),
    [
        ("", "--out is empty; name the output .npz or leave it out."),
        ("/dev/full", "cannot write --out /dev/full: it exists and is not a regular file."),
        pytest.param(
            "/proc/x.npz",
            "cannot write --out /proc/x.npz: /proc is not writable (",
            marks=_PROC,
        ),
        pytest.param(
            "/proc/sys/new/x.npz",
            "cannot write --out /proc/sys/new/x.npz: /proc/sys is not writable (",
            marks=_PROC,
        ),
    ],
    ids=["empty", "device", "unwritable-parent", "unwritable-ancestor"],
)
def test_an_out_that_cannot_be_written_is_refused_before_unpickling(
    out, reason, lswmd, no_unpickling
):
    """``--out ''`` ended, after the conversion, in ``.: exists and is not a regular file``;
    ``--out /proc/x.npz`` in write_atomic's error."""
    result = invoke("convert-wm811k", str(lswmd), "--out", out)
    assert result.exit_code == 2, result.output
    (error,) = _error_lines(result.output)
    assert error.startswith(f"orthobench: error: {reason}")
    assert "unpickling runs code" not in result.output


def test_convert_lswmd_refuses_a_folder_as_out_before_unpickling(lswmd, tmp_path, no_unpickling):
    # The command line's click.Path refuses a folder itself; the Python function did not.
    with pytest.raises(OrthobenchError, match=f"cannot write --out {tmp_path}: it exists and is"):
        wm811k.convert_lswmd(lswmd, tmp_path)


def test_an_out_in_new_folders_is_written_and_the_trial_file_removed(lswmd, tmp_path):
    out = tmp_path / "new" / "sub" / "x.npz"
    result = invoke("convert-wm811k", str(lswmd), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == [
        Path("new"),
        Path("new/sub"),
        Path("new/sub/x.npz"),
    ]
