"""The probe end to end on a small state: rows, raw values, pairing, determinism, storage."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from orthobench.cli import cli
from orthobench.exceptions import NumericsWarning, OrthobenchError, OrthobenchWarning
from orthobench.pointsets import point_count
from orthobench.probe import runner
from orthobench.probe.runner import run_probe
from orthobench.results import load_probe
from orthobench.suite import ComponentSpec, ProbeSpec
from tests.test_results import holding_the_lock, in_use_message

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
    return out, run_probe("t", SPEC, out, device=torch.device("cpu")).rows


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
    again = run_probe("t", SPEC, tmp_path, device=torch.device("cpu")).rows
    cols = ["estimator", "kernel", "probe_variance", "top1_agreement", "flip_rate"]
    assert again[cols].equals(frame[cols])
    summary = run_probe("t", SPEC, out, device=torch.device("cpu")).summary
    assert [o.status for o in summary.outcomes] == ["skipped", "skipped"]
    assert len(load_probe([out])) == len(frame)


def test_rows_of_theta_estimators_record_the_cost_of_an_acquisition_call(probed):
    _, frame = probed
    timed = frame["estimator"].isin(["mc", "orth", "orth-shrink", "mc@qmc"])
    assert (frame.loc[timed, "seconds_per_call"] > 0).all()
    # qLogEI and TPE are not OrthoBO's acquisition: no cost.
    assert frame.loc[~timed, "seconds_per_call"].isna().all()
    assert (frame["threads"] == 1).all()  # run_probe's default


def test_the_cost_is_forward_and_backward_on_a_batch_of_512_candidates(monkeypatch):
    from orthobench.config.names import parse_estimator
    from orthobench.probe import gp_probe
    from orthobench.surrogates.gp import build_gp
    from orthobench.surrogates.laplace import laplace_posterior

    calls = []

    class Recording(gp_probe.MarginalLogEI):
        def forward(self, X):
            calls.append((tuple(X.shape), X.requires_grad))
            value = super().forward(X)
            assert value.shape == (X.shape[0],)
            return value

    monkeypatch.setattr(gp_probe, "MarginalLogEI", Recording)
    monkeypatch.setattr(gp_probe, "COST_REPEATS", 2)
    x = torch.rand(8, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # Unfitted: the timing needs a GP and a q(theta), not the MAP (whose Hessian may be floored).
    model = build_gp(x, -(x - 0.5).square().sum(-1), "matern52-ard")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericsWarning)
        laplace = laplace_posterior(model)
    for name in ("orth", "radial-cross+rb"):  # equal weights with controls; a weighted rule
        calls.clear()
        outcomes = gp_probe._Outcomes(model, laplace)
        seconds = gp_probe.seconds_per_call(outcomes, parse_estimator(name), 16, 3, seed=0)
        assert seconds > 0
        assert calls == [((gp_probe.COST_CANDIDATES, 1, 3), True)] * 3  # warm-up + 2 timed


def test_report_shows_probe_tables_and_glossary(probed, tmp_path):
    from orthobench.report import build_report

    out, _ = probed
    html = build_report([out], tmp_path / "r.html").read_text()
    assert "Acquisition-noise probe" in html and "orth-shrink" in html
    assert "flip rate</dt>" in html and "<svg" in html


RULES = ProbeSpec(
    tasks=(ComponentSpec(name="hartmann6", label="hartmann6"),),
    kernels=("matern52-ard",),
    n_init=10,
    mc_samples=(16,),
    rebuilds=4,
    n_probes=8,
    estimators=("orth", "sr3", "radial-cross+rb", "qmc-owen+rb"),
    reference_samples=256,
)


@pytest.fixture(scope="module")
def probed_rules(tmp_path_factory):
    with pytest.warns(OrthobenchWarning, match="needs 19 points for one rule"):
        return run_probe(
            "t", RULES, tmp_path_factory.mktemp("rules"), device=torch.device("cpu")
        ).rows


def test_point_set_rows_record_their_evaluation_count_and_a_naive_baseline_at_it(probed_rules):
    """Hartmann6, Matern ARD: p = 8. Budget 16 -> sr3 uses one rule of 1 + 2 (p + 1) = 19 (over
    budget, warned), radial-cross+rb one cross of 2 (p - 1) = 14 in p - 1 = 7 dims, qmc-owen+rb 16.
    Each ratio is against naive iid MC with exactly that many draws in the same rebuild."""
    frame = probed_rules.set_index("estimator")
    expected = {
        "mc": 16,
        "orth": 16,
        "sr3": point_count("sr3", 8, 16),
        "radial-cross+rb": point_count("radial-cross", 7, 16),
        "qmc-owen+rb": 16,
    }
    assert expected["sr3"] == 19 and expected["radial-cross+rb"] == 14
    assert frame["n_evaluations"].to_dict() == expected
    shape = (RULES.rebuilds, RULES.n_probes)
    mc = np.asarray(frame.loc["mc", "values_ei"]).reshape(shape)
    reference = np.asarray(frame.loc["mc", "reference"])
    for name, count in expected.items():
        stored = np.asarray(frame.loc[name, "baseline_values_ei"])
        baseline = mc if count == 16 else stored.reshape(shape)
        assert (stored.size == 0) == (count == 16)
        values = np.asarray(frame.loc[name, "values_ei"]).reshape(shape)
        ratio = ((baseline - reference) ** 2).mean() / ((values - reference) ** 2).mean()
        assert frame.loc[name, "mse_ratio"] == pytest.approx(ratio, rel=1e-12)
    # The extra baselines are fresh naive draws, not the budget's `mc` values.
    assert not np.allclose(np.asarray(frame.loc["sr3", "baseline_values_ei"]).reshape(shape), mc)


def test_probe_tables_show_counts_and_rank_by_worst_case(probed_rules):
    from orthobench.probe.tables import format_summary, ranking_table

    ranking = ranking_table(probed_rules)
    assert set(ranking["estimator"]) == {"mc", "orth", "sr3", "radial-cross+rb", "qmc-owen+rb"}
    worst = list(ranking["worst_state_mse_ratio"])
    assert worst == sorted(worst, reverse=True)
    text = format_summary(probed_rules)
    assert "n_ev" in text and "Ranking" in text
    assert any(line.split()[3:5] == ["sr3", "19"] for line in text.splitlines())


def test_report_command_accepts_a_probe_only_directory(probed, tmp_path):
    from click.testing import CliRunner

    from orthobench.cli import cli

    out, _ = probed
    result = CliRunner().invoke(cli, ["report", str(out), "-o", str(tmp_path / "p.html")])
    assert result.exit_code == 0, result.output
    assert "Acquisition-noise probe" in (tmp_path / "p.html").read_text()


def test_a_damaged_state_file_is_reported_and_only_that_state_recomputed(probed, tmp_path):
    _, frame = probed
    run_probe("t", SPEC, tmp_path, device=torch.device("cpu"))
    damaged = sorted((tmp_path / "probe").glob("*.parquet"))[0]
    damaged.write_bytes(damaged.read_bytes()[:100])
    with pytest.warns(
        OrthobenchWarning, match=f"probe state {damaged.stem}: stored file is corrupt"
    ):
        again, summary = run_probe("t", SPEC, tmp_path, device=torch.device("cpu"))
    assert sorted((o.unit.id, o.status) for o in summary.outcomes) == sorted(
        (path.stem, "ok" if path == damaged else "skipped")
        for path in (tmp_path / "probe").glob("*.parquet")
    )
    cols = ["estimator", "kernel", "probe_variance", "top1_agreement", "flip_rate"]
    assert again[cols].equals(frame[cols])


@pytest.fixture
def no_probing(monkeypatch):
    """Fail the test if a probe state is computed."""

    def refuse(*args, **kwargs):
        raise AssertionError("a state was probed")

    monkeypatch.setattr(runner, "probe_state", refuse)


def test_a_probe_into_a_directory_another_run_holds_fails_before_probing(tmp_path, no_probing):
    out = tmp_path / "out"
    with holding_the_lock(out) as holder:
        with pytest.raises(OrthobenchError) as info:
            run_probe("t", SPEC, out, device=torch.device("cpu"))
    assert str(info.value) == in_use_message(out, holder.pid)


def test_a_probe_into_an_unwritable_directory_fails_before_probing(tmp_path, no_probing):
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "out"
    with pytest.raises(OrthobenchError, match=f"^the results directory {out} is not writable"):
        run_probe("t", SPEC, out, device=torch.device("cpu"))


def test_a_second_probe_command_on_a_held_directory_exits_2_before_the_report_imports(
    tmp_path, write_suite
):
    """Refused before seconds of plotting and statistics imports: the report's modules were
    imported ahead of the lock check, so a timed version of this test (< 2 s) failed on a loaded
    machine when nothing before it had imported them. A fresh interpreter says what it
    imported."""
    suite = write_suite(
        """
        name: t
        tasks: [hartmann6]
        budget: 0
        optimizers: [sobol]
        probe: {tasks: [hartmann6], n_init: 10}
        """
    )
    out = tmp_path / "out"
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from orthobench.cli import cli\n"
        f"result = CliRunner().invoke(cli, ['probe', {str(suite)!r}, '-o', {str(out)!r}, '-q'])\n"
        "heavy = [m for m in ('orthobench.report', 'orthobench.probe.tables') if m in sys.modules]\n"
        "print(json.dumps([result.exit_code, result.stderr.splitlines()[-1], heavy]))\n"
    )
    with holding_the_lock(out) as holder:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
        )
    exit_code, last_line, imported = json.loads(done.stdout.splitlines()[-1])
    assert exit_code == 2 and imported == []
    assert last_line == f"orthobench: error: {in_use_message(out, holder.pid)}"


NUMERICS = ProbeSpec(
    tasks=(ComponentSpec(name="hartmann6", label="hartmann6"),),
    n_init=10,
    mc_samples=(8,),
    rebuilds=3,
    n_probes=4,
    estimators=("orth", "qmc-owen+rb"),
    reference_samples=64,
)


@pytest.mark.parametrize("mode", ["floored", "unfloored"])
def test_rows_record_the_states_jitter_count_and_laplace_floor(mode, monkeypatch):
    """Every theta sample counts once: 64 reference draws + 3 rebuilds x 8 draws x 2 draw groups
    (``orth`` shares ``mc``'s), here all jittered; the floor status is that of the state's q."""
    import orthobench.surrogates.laplace as laplace_module
    import orthobench.surrogates.theta_sampled_gp as sampled_gp_module
    from orthobench.probe import gp_probe

    cholesky = sampled_gp_module._cholesky_with_jitter
    monkeypatch.setattr(
        sampled_gp_module, "_cholesky_with_jitter", lambda k: (cholesky(k)[0], k.shape[0])
    )
    built = []

    def laplace_posterior(model, **kwargs):
        built.append((kwargs, laplace_module.laplace_posterior(model, **kwargs)))
        return built[-1][1]

    monkeypatch.setattr(gp_probe, "laplace_posterior", laplace_posterior)
    spec = dataclasses.replace(NUMERICS, laplace=mode)
    (state,) = runner.probe_states("t", spec)
    rows = runner.probe_state(state, spec, torch.device("cpu"))
    ((kwargs, laplace),) = built
    assert kwargs == {"keep_raw": mode == "unfloored"}
    assert {r.estimator for r in rows} == {"mc", "orth", "qmc-owen+rb"}
    for row in rows:
        assert row.cholesky_jitter == 64 + 3 * 8 * 2
        assert row.laplace_floored is laplace.floored
        assert row.laplace_min_eigenvalue == float(laplace.raw_eigenvalues[0])
    assert (laplace.eig_floor == 0.0) == (mode == "unfloored" and not laplace.indefinite)


def test_tpe_rows_have_no_gp_numerics(probed):
    _, frame = probed
    tpe = frame[frame["kernel"] == "tpe"]
    assert tpe[["cholesky_jitter", "laplace_floored", "laplace_min_eigenvalue"]].isna().all().all()
    gp = frame[frame["kernel"] == "matern52-ard"]
    assert (gp["cholesky_jitter"] == 0).all() and gp["laplace_floored"].notna().all()


def test_the_laplace_option_is_read_from_yaml_and_checked():
    from orthobench.exceptions import SuiteError
    from orthobench.suite import parse_suite

    suite = {"name": "s", "budget": 0, "tasks": ["hartmann6"], "optimizers": ["sobol"]}
    probe = {"tasks": ["hartmann6"]}
    assert parse_suite({**suite, "probe": probe}).probe.laplace == "floored"
    parsed = parse_suite({**suite, "probe": {**probe, "laplace": "unfloored"}})
    assert parsed.probe.laplace == "unfloored"
    with pytest.raises(SuiteError, match="probe.laplace: Unknown laplace mode 'raw'"):
        parse_suite({**suite, "probe": {**probe, "laplace": "raw"}})


def test_each_state_runs_with_the_asked_thread_count_recorded_and_restored(monkeypatch, tmp_path):
    seen = []

    def record_threads(state, spec, device, dtype=torch.float64):
        seen.append(torch.get_num_threads())
        return probe_state(state, spec, device, dtype)

    probe_state = runner.probe_state
    monkeypatch.setattr(runner, "probe_state", record_threads)
    spec = dataclasses.replace(SPEC, estimators=("orth",), rebuilds=2, n_probes=4)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        frame = run_probe("t", spec, tmp_path, device=torch.device("cpu"), threads=1).rows
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen == [1]
    assert (frame["threads"] == 1).all()


def test_probe_command_rejects_a_thread_count_below_one(tmp_path):
    result = CliRunner().invoke(cli, ["probe", "suites/ci-variance.yaml", "--threads", "0"])
    assert result.exit_code == 2
    assert "--threads" in result.output


# ----------------------------------------------------------------------------------------------
# Rankings on states whose EI underflows


def test_rankings_of_a_state_far_below_its_incumbent_do_not_depend_on_exp_underflow(monkeypatch):
    """Every per-draw log EI shifted by -2000 (the state's EI ~ e^-2000, 0 in float64): the order
    of the probes is the same, so top-1 agreement and flip rate must be those of the unshifted
    state, not of a reference that ``exp`` turned into ties (top-1 1 and flip NaN). The EI-scale
    columns keep their meaning: EI itself, 0 there."""
    from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP

    spec = dataclasses.replace(NUMERICS, estimators=("orth",), n_probes=16, rebuilds=4)
    (state,) = runner.probe_states("t", spec)
    plain = runner.probe_state(state, spec, torch.device("cpu"))
    log_ei = ThetaSampledGP.log_ei
    monkeypatch.setattr(ThetaSampledGP, "log_ei", lambda self, X: log_ei(self, X) - 2000.0)
    shifted = runner.probe_state(state, spec, torch.device("cpu"))
    assert [r.estimator for r in shifted] == ["mc", "orth"]
    assert min(r.top1_agreement for r in plain) < 1.0  # a state with some ranking noise
    for a, b in zip(plain, shifted, strict=True):
        assert np.isfinite(a.flip_rate)
        assert (b.top1_agreement, b.flip_rate) == (a.top1_agreement, a.flip_rate)
        assert np.allclose(np.asarray(b.values_log) + 2000.0, a.values_log, rtol=0, atol=1e-9)
        assert not np.any(b.reference) and not np.any(b.values_ei)


def test_rankings_of_a_real_state_whose_reference_underflows_are_on_the_log_scale():
    """A linear objective with its minimum observed at the corner x = 0: the GP is certain, no
    probe can improve, and log EI is -600 to -40000 at the probes (qLogEI's MAP reference
    underflows to 0 at all of them, the marginal one at all but one). The ranking metrics read
    the log reference: every adjacent pair of the top 10 is ordered (a finite flip rate)."""
    from torch.quasirandom import SobolEngine

    from orthobench.probe import gp_probe, metrics
    from orthobench.probe.states import ProbeState

    spec = dataclasses.replace(NUMERICS, estimators=("orth", "qlogei"), n_probes=16, rebuilds=4)
    state = ProbeState("t", spec.tasks[0], "matern52-ard", 0, 0, spec.n_init)
    x = SobolEngine(2, scramble=False).draw(32, dtype=torch.float64)  # x[0] = 0
    probes = SobolEngine(2, scramble=True, seed=1).draw(16, dtype=torch.float64)
    names = runner.state_estimators(state, spec)
    values, refs, ranks, info = gp_probe.gp_values(spec, state, names, x, x.sum(-1), probes)
    assert not refs["map"].any() and np.count_nonzero(refs["theta"]) <= 1  # EI scale: underflow
    assert np.array_equal(np.exp(ranks["map"]), refs["map"])
    assert (ranks["map"] < -700).all() and len(set(ranks["theta"])) == 16  # no ties in log
    rows = runner._summaries(state, spec, values, refs, ranks, "mc", None, info)
    for row in rows:
        log = np.asarray(row.values_log).reshape(spec.rebuilds, spec.n_probes)
        rank = ranks["map" if row.estimator == "qlogei" else "theta"]
        assert np.isfinite(row.flip_rate)
        assert row.flip_rate == metrics.flip_rate(log, rank, spec.top_k)
        assert row.top1_agreement == metrics.top1_agreement(log, rank)
        reference = refs["map" if row.estimator == "qlogei" else "theta"]
        assert row.reference == reference.tolist()  # the stored column stays EI
