r"""OrthoBO (paper Alg. 1) and its like-for-like naive baseline MC-EI.

Each step: MAP-fit every ensemble member (:mod:`orthobench.surrogates.gp`), build its Laplace
posterior over hyperparameters (:mod:`orthobench.surrogates.laplace`), draw ``S`` whitened
hyperparameter samples once, and maximize the outer-log marginal EI over those fixed draws
(:class:`orthobench.acquisition.MarginalLogEI`) with ``optimize_acqf``. After the new observation
arrives, ensemble weights are updated from each member's predictive log score
(:mod:`orthobench.surrogates.ensemble`).

:class:`MCEI` runs the same pipeline, with the same seeds and therefore the same theta draws, and
the naive mean instead of the orthogonalized one: the like-for-like baseline of every comparison
(design notes, pitfall 6).
"""

from __future__ import annotations

import time

import torch
from botorch.optim import optimize_acqf

from orthobench.acquisition import MarginalLogEI
from orthobench.estimators import DEFAULT_ESTIMATOR, get_estimator
from orthobench.optimizers.base import Optimizer, Suggestion
from orthobench.seeding import torch_seed
from orthobench.surrogates.ensemble import EnsembleMember, SurrogateEnsemble
from orthobench.surrogates.laplace import THETA_SAMPLING, ThetaSampledGP

# Raw-sample evaluations are chunked to about this many (draw, candidate, training point) kernel
# entries (2 MiB in float64): blocks that stay in cache evaluate 512 raw samples about twice as
# fast as one 512 x 512 x n block, which at n = 100 would also need gigabytes.
_RAW_CHUNK_ENTRIES = 2**18


class OrthoBO(Optimizer):
    r"""Orthogonalized marginal-EI Bayesian optimization with a GP ensemble (paper Alg. 1).

    Args:
        dim: Number of search dimensions ``d``.
        kernel: GP kernel name, or a list of names for an ensemble (one member each; see
            :data:`orthobench.surrogates.gp.KERNELS`).
        mc_samples: Hyperparameter draws ``S`` per member and step.
        estimator: Estimator name (:data:`orthobench.estimators.ESTIMATORS`).
        theta_sampling: ``"iid"``, ``"antithetic"`` or ``"qmc"`` draws of theta.
        alpha: Relative floor of the outer log (see :mod:`orthobench.acquisition`).
        tau: Temperature of the ensemble weight update.
        delta: Floor of the ensemble weights.
        raw_samples: Raw samples of ``optimize_acqf``'s initialization.
        num_restarts: Restarts of ``optimize_acqf``.
        seed, device, dtype: See :class:`~orthobench.optimizers.base.Optimizer`.

    ``ask`` records in ``Suggestion.info``: the estimator, the ensemble kernels, weights and
    their entropy, per member whether the Hessian's eigenvalues were floored, the smallest raw
    eigenvalue, the Laplace re-centring shift and the draws that needed Cholesky jitter, and a
    ``fallback`` string when a fallback was taken (GP fit kept its initialization, Hessian not
    positive definite, re-centring stalled, Cholesky jitter).
    """

    def __init__(
        self,
        dim: int,
        *,
        kernel: str | list[str] = "matern52-ard",
        mc_samples: int = 512,
        estimator: str = DEFAULT_ESTIMATOR,
        theta_sampling: str = "iid",
        alpha: float = 1e-3,
        tau: float = 1.0,
        delta: float = 0.001,
        raw_samples: int = 512,
        num_restarts: int = 8,
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(dim, seed=seed, device=device, dtype=dtype)
        for name, value in {
            "mc_samples": mc_samples,
            "raw_samples": raw_samples,
            "num_restarts": num_restarts,
        }.items():
            if value < 1:
                raise ValueError(f"`{name}` must be >= 1, but got {value}.")
        if mc_samples < 4:
            raise ValueError(
                f"`mc_samples` must be >= 4 (cross-fitting needs 2 draws per fold), but got {mc_samples=}."
            )
        if theta_sampling not in THETA_SAMPLING:
            raise ValueError(
                f"`theta_sampling` must be one of {THETA_SAMPLING}, but got {theta_sampling!r}."
            )
        if theta_sampling == "antithetic" and mc_samples % 2:
            raise ValueError(f"Antithetic draws need an even `mc_samples`, but got {mc_samples=}.")
        if not 0 < alpha <= 1:
            raise ValueError(
                f"`alpha` is relative to the naive estimate and must be in (0, 1], but got {alpha=}."
            )
        get_estimator(estimator)  # fail at construction on an unknown name
        kernels = [kernel] if isinstance(kernel, str) else list(kernel)
        self.ensemble = SurrogateEnsemble(kernels, tau=tau, delta=delta)
        self.mc_samples = mc_samples
        self.estimator = estimator
        self.theta_sampling = theta_sampling
        self.alpha = alpha
        self.raw_samples = raw_samples
        self.num_restarts = num_restarts
        # The previous step's members, kept to score the observation that follows them.
        self._previous: list[ThetaSampledGP] = []

    def _on_tell(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Update the ensemble weights from the log predictive density of the new points under
        the members fitted before them (each observation is scored once)."""
        if self._previous:
            scores = torch.stack([gp.log_predictive_density(x, -y) for gp in self._previous])
            self.ensemble.update(scores)
            self._previous = []

    def acquisition(self) -> MarginalLogEI:
        """Fit the ensemble on the current history and build its acquisition (for probes).

        Fits and theta draws are seeded by the optimizer seed and the number of asks so far:
        called after an ``ask`` and before the matching ``tell``, this rebuilds exactly the
        acquisition that ``ask`` maximized. Fresh draws for probe rebuilds come from
        ``self.ensemble.members[m].laplace.sample_whitened`` with the probe's own seeds.
        """
        return self._build_acquisition(self._fit())

    def _fit(self) -> list[EnsembleMember]:
        with torch_seed(self._step_seed("fit")):
            return self.ensemble.fit(self.train_x, -self.train_y)

    def _build_acquisition(self, members: list[EnsembleMember]) -> MarginalLogEI:
        gps, controls = [], []
        for i, member in enumerate(members):
            z = member.laplace.sample_whitened(
                self.mc_samples, self.theta_sampling, seed=self._step_seed("theta", i)
            )
            gps.append(ThetaSampledGP.from_model(member.model, member.laplace.theta(z)))
            controls.append(z)
        return MarginalLogEI(
            members[0].model,
            gps,
            controls,
            self.ensemble.weights,
            estimator=self.estimator,
            alpha=self.alpha,
        )

    def ask(self, n: int = 1) -> Suggestion:
        if n != 1:
            raise ValueError(
                f"{type(self).__name__} proposes one point per ask (marginal EI is a q=1 acquisition), but got {n=}."
            )
        if self.train_x.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 observations before ask(), but has {self.train_x.shape[0]}."
            )
        self._asks += 1
        start = time.perf_counter()
        members = self._fit()
        fitted = time.perf_counter()
        acqf = self._build_acquisition(members)
        bounds = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(self.train_x)
        chunk = max(1, _RAW_CHUNK_ENTRIES // (self.mc_samples * self.train_x.shape[0]))
        with torch_seed(self._step_seed("acq")):
            candidate, _ = optimize_acqf(
                acqf,
                bounds=bounds,
                q=1,
                num_restarts=self.num_restarts,
                raw_samples=self.raw_samples,
                options={"init_batch_limit": chunk},
            )
        end = time.perf_counter()
        self._previous = acqf.members if len(acqf.members) > 1 else []
        return Suggestion(
            x=candidate.detach().cpu().numpy(),
            fit_seconds=fitted - start,
            acq_seconds=end - fitted,
            info=self._info(acqf),
        )

    def _info(self, acqf: MarginalLogEI) -> dict[str, object]:
        members = self.ensemble.members
        fallbacks = []
        for member, gp in zip(members, acqf.members, strict=True):
            lap = member.laplace
            if member.fit_info.get("fallback"):
                fallbacks.append(f"{member.kernel}: {member.fit_info['fallback']}")
            if lap.fallback:
                fallbacks.append(f"{member.kernel}: {lap.fallback}")
            if lap.indefinite:
                fallbacks.append(
                    f"{member.kernel}: Laplace Hessian not positive definite (min eigenvalue "
                    f"{float(lap.raw_eigenvalues[0]):.3g}); eigenvalues floored at {lap.eig_floor:.3g}"
                )
            if gp.n_jittered:
                fallbacks.append(
                    f"{member.kernel}: {gp.n_jittered} theta draw(s) needed Cholesky jitter"
                )
        return {
            "estimator": self.estimator,
            "theta_sampling": self.theta_sampling,
            "mc_samples": self.mc_samples,
            **self.ensemble.info(),
            "eig_floored": [m.laplace.floored for m in members],
            "min_eigenvalue": [float(m.laplace.raw_eigenvalues[0]) for m in members],
            "recenter_shift": [m.laplace.recenter_shift for m in members],
            "jittered_draws": [gp.n_jittered for gp in acqf.members],
            "fallback": "; ".join(fallbacks) or None,
        }


class MCEI(OrthoBO):
    """MC-EI: OrthoBO's pipeline with the naive theta-MC mean (the like-for-like baseline).

    Same fits, Laplace posteriors, seeds and hence theta draws as :class:`OrthoBO` with the same
    seed; only the estimator differs (``"mc"``, paper Eq. (3)), so the outer log is the log of the
    naive estimate. Args as :class:`OrthoBO` without ``estimator`` and ``alpha``.
    """

    def __init__(
        self,
        dim: int,
        *,
        kernel: str | list[str] = "matern52-ard",
        mc_samples: int = 512,
        theta_sampling: str = "iid",
        tau: float = 1.0,
        delta: float = 0.001,
        raw_samples: int = 512,
        num_restarts: int = 8,
        seed: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(
            dim,
            kernel=kernel,
            mc_samples=mc_samples,
            estimator="mc",
            theta_sampling=theta_sampling,
            alpha=1.0,
            tau=tau,
            delta=delta,
            raw_samples=raw_samples,
            num_restarts=num_restarts,
            seed=seed,
            device=device,
            dtype=dtype,
        )
