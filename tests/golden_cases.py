r"""Golden values: how each number pinned in ``tests/golden_values.json`` is computed.

The one implementation behind ``tests/test_golden.py`` (which compares) and
``tests/update_goldens.py`` (``make goldens``, which recomputes and rewrites). A case is a group of
values computed together; :func:`compute` runs it with one torch thread (and one BLAS thread), as
the runner runs a cell (:func:`orthobench.executors.thread_limits`), in float64, the default
dtype of cells, optimizers and probes.

Cases and what moves them:

- ``bo-<optimizer>``: the two BO evaluations of a Hartmann6 cell (seed 0, 16 initial points) run
  by :func:`orthobench.loop.run_cell`, so every seed comes from :mod:`orthobench.seeding` as in
  ``orthobench run``. Moved by seeding, initial design, fits, Laplace draws, estimators and
  acquisition maximization.
- ``bo-orthobo-q2``: the same cell of OrthoBO at ``q = 2`` (two BO steps of two points): the
  nested marginal qEI, its per-draw inner base samples and the greedy search then joint climb.
- ``probe-seed<k>``: ratios of one probe state (:func:`orthobench.probe.runner.probe_state`).
  Moved by the same, plus the probe's own seeds and metrics. ``probe-q2-seed0``: the state of
  seed 0 probed with batches of 2 points (the nested estimator's rebuilds and reference).
- ``fast-fit``: the fast MAP fit (:func:`orthobench.surrogates.fit.fit_fast`) on a fixed data
  set. ``laplace``: the Laplace posterior (:func:`orthobench.surrogates.laplace.laplace_posterior`)
  at fixed hyperparameters on that data set and its first theta draws, from literal seeds. Neither
  uses :mod:`orthobench.seeding`, so a failure there alone points at the fit or the Laplace code.

Tolerances. Within one machine every value is reproduced exactly (fixed seeds, one thread).
Across BLAS or libm builds rounding differs, so a value passes when
``|new - old| <= atol + rtol * |old|``, with ``rtol`` :data:`OPTIMIZED_RTOL` or
:data:`CLOSED_FORM_RTOL` and ``atol`` the same number times the natural unit of the case's values
(or 0), each case says why. A change of seeding or numerics moves these values by far more:
another theta draw or acquisition start moves a BO step's ``y`` by 1e-2 to 1 and a probe variance
or ratio by 1e-1 to 1 (every derived seed shifted by one moved them by 2.6e-2 to 2e3 relative).

Machines. The BO and probe cases also move with the CPU that MKL and torch's kernels dispatch to:
the same code gave BO ``y`` 5e-4 to 0.65 and probe ratios 5e-6 to 1.5e-2 (relative) apart on an
AVX-512 Intel Xeon and on the AMD EPYC that wrote the file, beyond any tolerance that still fails
on a seeding change. So a case may also hold the values of other machines (``also``, each
with its :func:`machine`), recorded with ``python -m tests.update_goldens --add-machine`` for
code whose values are unchanged on the machine that wrote the file; it passes within tolerance of
any of them (:func:`moved`). A change made on purpose rewrites ``values`` and drops ``also``.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.quasirandom import SobolEngine

from orthobench.executors import thread_limits
from orthobench.loop import run_cell
from orthobench.optimizers.orthobo import OrthoBO
from orthobench.probe.runner import probe_state
from orthobench.probe.states import ProbeState
from orthobench.results._provenance import cpu_model
from orthobench.suite import Cell, ComponentSpec, ProbeSpec
from orthobench.surrogates.fit import fit_model
from orthobench.surrogates.gp import build_gp
from orthobench.surrogates.laplace import LaplacePosterior, laplace_posterior
from orthobench.surrogates.theta_algebra import get_theta, set_theta, theta_layout
from orthobench.tasks.synthetic import hartmann6
from orthobench.theta_estimators import draw_thetas

#: Where the pinned values live.
GOLDEN_PATH = Path(__file__).with_name("golden_values.json")

#: Values that pass through an optimizer (the fits' L-BFGS-B, ``optimize_acqf``): its iterates
#: follow the rounding of every gradient, so across BLAS builds the point where it stops can move
#: within its stopping tolerance (the fast fit stops at a projected gradient of 1e-6 in theta,
#: about 1e-6 in a coordinate for Hessian eigenvalues of order 1). 1e-6 keeps that and fails on
#: any change of draws or algorithm, which moves these values by 1e-3 or more.
OPTIMIZED_RTOL = 1e-6
#: Closed-form values (autograd Hessian of a 20-point GP's log posterior, the eigendecomposition
#: of that 8 x 8 matrix, whose eigenvalues are at least 0.2 apart, seeded normal draws): rounding
#: is about cond * eps, 1e-12 here, so 1e-9 leaves three orders of margin.
CLOSED_FORM_RTOL = 1e-9

TASK = ComponentSpec(name="hartmann6", label="hartmann6")
SEED = 0
# 16 initial points rather than fewer: with 10, the Laplace Hessian of seed 1's initial design has
# two eigenvalues raised to the same floor, whose eigenvectors LAPACK may rotate freely within
# their plane, so the theta draws (and every value pinned after them) would depend on the LAPACK
# build. With 16, no Laplace posterior of these cases is floored at all.
N_INIT = 16
BUDGET = 2
# Cost settings only; estimators, theta sampling, fits and seeding stay the defaults. OrthoBO and
# MC-EI keep the raw-sample screen on fewer draws (it runs whenever theta_samples exceeds
# screen_theta_samples, as with the defaults 512 and 64).
_ACQF = {"raw_samples": 16, "num_restarts": 2}
_THETA = {**_ACQF, "theta_samples": 32, "screen_theta_samples": 16}
BO_PARAMS: dict[str, dict[str, object]] = {
    "orthobo": _THETA,
    "mc-ei": _THETA,
    "qlogei": {**_ACQF, "function_samples": 16},
    "turbo": {**_ACQF, "function_samples": 16, "n_candidates": 100},
    # 16 initial points exceed the default 10 startup trials, so both steps are TPE's.
    "tpe-optuna": {},
    "mc-tpe": {"bootstrap_fits": 8},
    "orthobo-tpe": {"bootstrap_fits": 8, "control_mean_draws": 64},
}

_ORTHOBO_DEFAULTS = inspect.signature(OrthoBO).parameters
#: OrthoBO's default estimator (``qmc-owen+rb``), read from its signature so the goldens follow it.
DEFAULT_ESTIMATOR: str = _ORTHOBO_DEFAULTS["estimator"].default
PROBE_SPEC = ProbeSpec(
    tasks=(TASK,),
    n_init=N_INIT,  # no floored eigenvalue in either state (see N_INIT)
    mc_samples=(8,),
    rebuilds=4,
    n_probes=8,
    estimators=("orth", DEFAULT_ESTIMATOR),
    reference_samples=64,
    seeds=(0, 1),
)

# The fixed data set of the fit and Laplace cases: Hartmann6 at 20 scrambled Sobol points of a
# literal Sobol seed (not a derived one), negated as the optimizers model it.
_DATA_POINTS = 20
_DATA_SOBOL_SEED = 0
_KERNEL = "matern52-ard"  # the default kernel of every GP optimizer
# The fast fit's optimum on that data set, rounded to 4 digits: the Laplace case evaluates q(theta)
# here, so it depends on no optimizer. Order of theta_layout: mean, log_noise, log_lengthscale_0-5.
LAPLACE_THETA = (-0.1315, -5.0096, -0.1298, 0.196, -0.9012, 0.1505, -1.1929, -1.275)
_DRAW_SEED = 0


@dataclass(frozen=True)
class GoldenCase:
    """A group of golden values computed together.

    Attributes:
        compute: Zero-argument function returning ``{value name: value}``; run it through
            :func:`compute`, which sets the thread count.
        rtol: Relative tolerance of every value of the case.
        atol: Absolute tolerance: for values that can lie near 0 on the scale of their kind
            (a ``y`` of Hartmann6 far from its minima, a theta coordinate), whose rounding is
            that of the larger terms they are computed from.
        note: Where the values come from (written beside them in the JSON file).
    """

    compute: Callable[[], dict[str, float]]
    rtol: float
    atol: float
    note: str


#: Draws of the batch case's greedy search (its climb runs on ``theta_samples``, 32): fewer than
#: the climb's, as the defaults 64 and 512 are, so both stages run.
BATCH_PARAMS = {**_THETA, "batch_theta_samples": 16}
BATCH_Q = 2


def bo_cell(optimizer: str, q: int = 1) -> Cell:
    """The Hartmann6 cell of ``optimizer`` (float64: ``Cell``'s default dtype), ``q`` points per
    step (:data:`BATCH_PARAMS` at ``q > 1``)."""
    params = BO_PARAMS[optimizer] if q == 1 else BATCH_PARAMS
    return Cell(
        suite="golden",
        task=TASK,
        optimizer=ComponentSpec(name=optimizer, params=params, label=optimizer),
        seed=SEED,
        n_init=N_INIT,
        budget=BUDGET,
        q=q,
    )


def _bo_steps(optimizer: str, q: int = 1) -> dict[str, float]:
    records = run_cell(bo_cell(optimizer, q), "cpu")
    return {f"y[{r.iteration}]": r.y for r in records if r.phase == "bo"}


def probe_state_of(seed: int, q: int = 1) -> ProbeState:
    """The probe state of ``seed``: the initial design of :data:`PROBE_SPEC`, iteration 0,
    probed with batches of ``q`` points."""
    return ProbeState(
        suite="golden",
        task=TASK,
        surrogate=PROBE_SPEC.kernels[0],
        seed=seed,
        state_iteration=0,
        n_init=PROBE_SPEC.n_init,
        q=q,
    )


def _probe_ratios(seed: int, q: int = 1) -> dict[str, float]:
    records = probe_state(probe_state_of(seed, q), PROBE_SPEC, torch.device("cpu"))
    rows = {r.estimator: r for r in records}
    # The baseline's own variance too: a change that scaled every estimator's variance alike
    # would leave the ratios as they were.
    values = {"mc.probe_variance": rows["mc"].probe_variance}
    for name in PROBE_SPEC.estimators:
        values[f"{name}.var_ratio"] = rows[name].var_ratio
    return values


def fixed_data() -> tuple[torch.Tensor, torch.Tensor]:
    """``20 x 6`` scrambled Sobol points and their ``20`` negated Hartmann6 values, float64."""
    x = SobolEngine(6, scramble=True, seed=_DATA_SOBOL_SEED).draw(_DATA_POINTS, dtype=torch.float64)
    task = hartmann6()
    y = [task.evaluate(row.numpy(), seed=0, device=torch.device("cpu")).y for row in x]
    return x, -torch.tensor(y, dtype=torch.float64)


def _fast_fit() -> dict[str, float]:
    x, y = fixed_data()
    model, info = fit_model(x, y, _KERNEL, fit="fast")
    theta = get_theta(model)
    values = dict(zip(theta_layout(model).names, theta.tolist(), strict=True))
    values["neg_log_posterior"] = float(info["neg_log_posterior"])
    return values


def laplace_at_fixed_theta() -> LaplacePosterior:
    """The Laplace posterior of the ``matern52-ard`` GP on :func:`fixed_data` at
    :data:`LAPLACE_THETA` (default floor; no eigenvalue is below it there)."""
    x, y = fixed_data()
    model = build_gp(x, y, _KERNEL)
    set_theta(model, torch.tensor(LAPLACE_THETA, dtype=torch.float64))
    model.eval()
    return laplace_posterior(model)


def _laplace() -> dict[str, float]:
    laplace = laplace_at_fixed_theta()
    names = laplace.layout.names
    cov = laplace.cov_factor @ laplace.cov_factor.T
    values = {"log_det_cov": -float(torch.linalg.slogdet(laplace.hessian).logabsdet)}
    values |= {f"cov[{n},{n}]": float(v) for n, v in zip(names, cov.diagonal(), strict=True)}
    # The first theta of OrthoBO's default draws: its theta_sampling (iid) through the
    # eigenvectors of H (what the canonical eigenvector signs fix), and its default estimator
    # (a point set, Rao-Blackwellized), both with its default budget.
    budget = _ORTHOBO_DEFAULTS["theta_samples"].default
    sampling = _ORTHOBO_DEFAULTS["theta_sampling"].default
    z = laplace.sample_whitened(budget, sampling, seed=_DRAW_SEED)
    default = draw_thetas(laplace, DEFAULT_ESTIMATOR, budget, seed=_DRAW_SEED)
    draws = {sampling: laplace.theta(z)[0], DEFAULT_ESTIMATOR: default.theta[0]}
    for label, theta in draws.items():
        values |= {f"theta_{label}[0].{n}": float(v) for n, v in zip(names, theta, strict=True)}
    return values


CASES: dict[str, GoldenCase] = {
    **{
        f"bo-{name}": GoldenCase(
            compute=functools.partial(_bo_steps, name),
            rtol=OPTIMIZED_RTOL,
            # Hartmann6 values lie in [-3.32, 0]: judged on that unit scale, not on their own.
            atol=OPTIMIZED_RTOL,
            note=(
                f"run_cell: {TASK.name}, {name}({', '.join(f'{k}={v}' for k, v in params.items())}), "
                f"seed {SEED}, n_init {N_INIT}, budget {BUDGET}, float64, 1 thread; y of the BO "
                "evaluations."
            ),
        )
        for name, params in BO_PARAMS.items()
    },
    "bo-orthobo-q2": GoldenCase(
        compute=functools.partial(_bo_steps, "orthobo", BATCH_Q),
        rtol=OPTIMIZED_RTOL,
        atol=OPTIMIZED_RTOL,  # Hartmann6's unit scale, as the q = 1 cells
        note=(
            f"run_cell: {TASK.name}, orthobo({', '.join(f'{k}={v}' for k, v in BATCH_PARAMS.items())}), "
            f"q {BATCH_Q}, seed {SEED}, n_init {N_INIT}, budget {BUDGET}, float64, 1 thread; y of "
            "the BO evaluations."
        ),
    ),
    "probe-q2-seed0": GoldenCase(
        compute=functools.partial(_probe_ratios, 0, BATCH_Q),
        rtol=OPTIMIZED_RTOL,
        atol=0.0,  # positive variances and ratios, as the q = 1 probe cases
        note=(
            f"probe_state as probe-seed0, batches of {BATCH_Q} points: naive MC's probe variance "
            "and the var_ratio of each estimator against it."
        ),
    ),
    **{
        f"probe-seed{seed}": GoldenCase(
            compute=functools.partial(_probe_ratios, seed),
            rtol=OPTIMIZED_RTOL,
            # Variances (1e-8 to 1e-6) and ratios (1e-1 to 10) are positive and move relative to
            # their own size: relative only.
            atol=0.0,
            note=(
                f"probe_state: {TASK.name}, {PROBE_SPEC.kernels[0]}, seed {seed}, iteration 0, "
                f"n_init {PROBE_SPEC.n_init}, S={PROBE_SPEC.mc_samples[0]}, "
                f"{PROBE_SPEC.rebuilds} rebuilds, {PROBE_SPEC.n_probes} probes, "
                f"{PROBE_SPEC.reference_samples} reference draws, 1 thread; naive MC's probe "
                "variance and the var_ratio of each estimator against it."
            ),
        )
        for seed in PROBE_SPEC.seeds
    },
    "fast-fit": GoldenCase(
        compute=_fast_fit,
        rtol=OPTIMIZED_RTOL,
        atol=OPTIMIZED_RTOL,  # log coordinates: unit scale
        note=(
            f"fit_model(fit='fast'), {_KERNEL}, on -{TASK.name} at {_DATA_POINTS} scrambled Sobol "
            f"points (SobolEngine seed {_DATA_SOBOL_SEED}): theta at the optimum and "
            "neg_log_posterior there."
        ),
    ),
    "laplace": GoldenCase(
        compute=_laplace,
        rtol=CLOSED_FORM_RTOL,
        atol=CLOSED_FORM_RTOL,  # log coordinates and Sigma = H^-1 with H's eigenvalues >= 0.4
        note=(
            "laplace_posterior of the fast-fit case's GP at LAPLACE_THETA (its optimum rounded): "
            "log det and diagonal of Sigma = H^-1, and theta[0] of OrthoBO's default iid "
            f"sampling and default estimator at its default budget, seed {_DRAW_SEED}."
        ),
    ),
}


def compute(name: str) -> dict[str, float]:
    """The values of case ``name``, computed with one torch and BLAS thread."""
    with thread_limits(1):
        return CASES[name].compute()


def machine() -> str:
    """What the BO and probe values depend on besides the code and the thread count: the CPU's
    model, the instruction set torch's kernels dispatch to, and the torch version."""
    capability = torch.backends.cpu.get_cpu_capability()
    return f"{cpu_model()}; torch {torch.__version__} {capability}"


def moved(case: str, entry: dict[str, object], new: dict[str, float]) -> list[Change]:
    """The values of ``case`` beyond tolerance of its pinned ``entry``: none where ``new`` is
    within tolerance of its ``values`` or of any other machine's (``also``); else those against
    ``values``, the machine that wrote the file."""
    pinned = [entry["values"], *(other["values"] for other in entry.get("also", []))]
    found = [[c for c in changes(case, values, new) if c.beyond] for values in pinned]
    return [] if not all(found) else found[0]


def load_goldens(path: Path = GOLDEN_PATH) -> dict[str, dict[str, object]]:
    """The pinned cases: ``{case: {"note": str, "values": {value name: float}}}``, and where
    other machines give other values, ``"also": [{"machine": str, "values": {...}}]``."""
    return json.loads(path.read_text())


def dump_goldens(goldens: dict[str, dict[str, object]], path: Path = GOLDEN_PATH) -> None:
    """Write ``goldens`` as :func:`load_goldens` reads it (floats written to round-trip exactly)."""
    path.write_text(json.dumps(goldens, indent=2) + "\n")


@dataclass(frozen=True)
class Change:
    """One value of a case that differs between the pinned and the recomputed values.

    ``old`` or ``new`` is None for a value only one side has; ``beyond`` is whether the change
    exceeds the case's tolerance (a value missing on one side always does).
    """

    name: str
    old: float | None
    new: float | None
    beyond: bool

    @property
    def relative(self) -> float:
        """``|new - old| / |old|`` (inf for a missing value or an old value of 0)."""
        if self.old is None or self.new is None:
            return math.inf
        return abs(self.new - self.old) / abs(self.old) if self.old else math.inf


def changes(case: str, old: dict[str, float], new: dict[str, float]) -> list[Change]:
    """Every value of ``case`` (``case/value``) whose recomputed value differs at all from the
    pinned one, with whether it moved beyond the case's tolerance:
    ``|new - old| <= atol + rtol * |old|`` with the case's tolerances."""
    rtol, atol = CASES[case].rtol, CASES[case].atol
    found = []
    for name in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        beyond = a is None or b is None or not abs(b - a) <= atol + rtol * abs(a)
        found.append(Change(f"{case}/{name}", a, b, beyond))
    return found


def format_changes(found: list[Change]) -> str:
    """One line per change: name, old -> new, relative change, and ``!`` beyond tolerance."""
    if not found:
        return "no value changed"
    width = max(len(c.name) for c in found)
    return "\n".join(
        f"{'!' if c.beyond else ' '} {c.name:<{width}}  {c.old!r:>22} -> {c.new!r:<22}  "
        f"rel {c.relative:.3g}"
        for c in found
    )
