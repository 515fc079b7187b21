"""The probe end to end on a small state: rows, raw values, pairing, determinism, storage."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from orthobench.probe.runner import load_probe, parse_estimator, run_probe
from orthobench.suite import ComponentSpec, ProbeSpec

SPEC = ProbeSpec(
    tasks=(ComponentSpec(name="hartmann6", label="hartmann6"),),
    kernels=("matern52-ard",),
    n_init=10,
    mc_samples=(8,),
    rebuilds=6,
    n_probes=16,
    estimators=("orth", "orth-shrink", "mc@qmc", "qlogei", "orthobo-tpe"),
    reference_samples=256,
)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    return out, run_probe("t", SPEC, out, device=torch.device("cpu"))


def test_rows_cover_every_estimator_with_raw_values(probed):
    _, frame = probed
    gp = frame[frame["kernel"] == "matern52-ard"]
    assert set(gp["estimator"]) == {"mc", "orth", "orth-shrink", "mc@qmc", "qlogei"}
    assert set(frame[frame["kernel"] == "tpe"]["estimator"]) == {"mc-tpe", "orthobo-tpe"}
    for row in frame.itertuples():
        values = np.asarray(row.values_ei).reshape(SPEC.rebuilds, SPEC.n_probes)
        assert np.isfinite(values).all()
        assert row.probe_variance == pytest.approx(np.var(values, axis=0, ddof=1).mean())
        assert len(row.reference) == SPEC.n_probes
    baseline = frame[frame["estimator"].isin(["mc", "mc-tpe"])]
    assert (baseline["var_ratio"] == 1.0).all() and (baseline["var_ratio_low"] == 1.0).all()


def test_estimators_of_a_rebuild_share_their_theta_draws(probed):
    """Common random numbers: the orthogonal correction is the only difference from naive MC."""
    _, frame = probed
    mc = np.asarray(frame[frame["estimator"] == "mc"]["values_ei"].iloc[0])
    shrunk = np.asarray(frame[frame["estimator"] == "orth-shrink"]["values_ei"].iloc[0])
    qmc = np.asarray(frame[frame["estimator"] == "mc@qmc"]["values_ei"].iloc[0])
    # paired draws: the (shrunk) correction moves values far less than fresh draws do
    assert np.abs(shrunk - mc).mean() < 0.5 * np.abs(qmc - mc).mean()


def test_same_spec_gives_the_same_numbers_and_stored_states_are_reused(probed, tmp_path):
    out, frame = probed
    again = run_probe("t", SPEC, tmp_path, device=torch.device("cpu"))
    cols = ["estimator", "kernel", "probe_variance", "top1_agreement", "flip_rate"]
    assert again[cols].equals(frame[cols])
    seen = []
    run_probe(
        "t", SPEC, out, device=torch.device("cpu"), on_state=lambda s, status: seen.append(status)
    )
    assert seen == ["stored", "stored"]
    assert len(load_probe([out])) == len(frame)


@pytest.mark.parametrize("name", ["nope", "orth@sobol", "qlogei@qmc"])
def test_unknown_estimators_are_rejected(name):
    with pytest.raises(ValueError):
        parse_estimator(name)


def test_report_shows_probe_tables_and_glossary(probed, tmp_path):
    from orthobench.report import build_report

    out, _ = probed
    html = build_report([out], tmp_path / "r.html").read_text()
    assert "Acquisition-noise probe" in html and "orth-shrink" in html
    assert "flip rate</dt>" in html and "<svg" in html
