r"""OrthoBO's marginal log-EI as a BoTorch acquisition function of a user's fitted ``SingleTaskGP``.

:func:`marginal_log_ei` takes a ``SingleTaskGP`` MAP-fitted with BoTorch's ``fit_gpytorch_mll``,
builds the Laplace approximation ``q(theta)`` around its fitted hyperparameters
(:func:`laplace_posterior`, public here: pass its result as ``laplace`` to reuse it), draws ``S`` hyperparameter samples
(:func:`~orthobench.theta_estimators.draw_thetas`) and returns OrthoBO's acquisition over those
fixed draws (:class:`~orthobench.acquisition.MarginalLogEI`, or the nested batch version
:class:`~orthobench.acquisition.MarginalLogQEI` for ``q > 1``), built as
:class:`~orthobench.optimizers.orthobo.OrthoBO` builds it, so it plugs into
``botorch.optim.optimize_acqf``.

This module is ``orthobench.botorch``; its ``from botorch...`` imports are absolute and resolve to
BoTorch itself.
"""

from __future__ import annotations

import math

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models import SingleTaskGP
from botorch.models.transforms.outcome import Standardize
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.means import ConstantMean
from torch import Tensor

from orthobench.acquisition import MarginalLogEI, MarginalLogQEI, draw_inner_base_samples
from orthobench.config.names import ThetaEstimator
from orthobench.config.params import Count, check_even_budgets, check_value, is_integer
from orthobench.estimators import min_draws
from orthobench.exceptions import ConfigError
from orthobench.seeding import derive_seed
from orthobench.surrogates.laplace import LaplacePosterior, laplace_posterior
from orthobench.surrogates.theta_algebra import theta_layout
from orthobench.surrogates.theta_sampled_gp import ThetaSampledGP
from orthobench.theta_estimators import DEFAULT_THETA_ESTIMATOR, draw_thetas, parse_theta_estimator

# laplace_posterior: a model's Laplace posterior, which marginal_log_ei takes to reuse across
# rebuilds (its Hessian costs more than the draws).
__all__ = ["laplace_posterior", "marginal_log_ei"]


class _OriginalUnits:
    """Adds ``log(y_std)`` to the marginal log-EI, moving it from the model's standardized outcome
    scale to the original one: ``EI`` is linear in the outcome scale, and so are every estimator
    and the relative floor, so the shift is exact and changes no gradient."""

    log_outcome_scale: float

    def _log_marginal(self, X: Tensor) -> Tensor:
        return super()._log_marginal(X) + self.log_outcome_scale  # type: ignore[misc]

    def scaled_estimates(
        self, X: Tensor, estimator: str | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        log_scale, value, mc_value = super().scaled_estimates(X, estimator)  # type: ignore[misc]
        return log_scale + self.log_outcome_scale, value, mc_value


class _MarginalLogEI(_OriginalUnits, MarginalLogEI):
    """:class:`~orthobench.acquisition.MarginalLogEI` in the model's original outcome units,
    without pending points (as BoTorch's analytic acquisitions)."""

    #: Read by ``optimize_acqf(..., sequential=True)`` before it sets the pending points.
    X_pending = None

    def set_X_pending(self, X_pending: Tensor | None = None) -> None:
        # Stored and ignored, pending points would let a sequential-greedy batch repeat a point.
        # 0 x d is none, as marginal_log_ei reads it.
        if X_pending is not None and X_pending.numel():
            raise UnsupportedError(
                f"The q = 1 marginal log-EI has no pending points, but got X_pending of shape "
                f"{tuple(X_pending.shape)}; build it with marginal_log_ei(..., q=2) or more."
            )


class _MarginalLogQEI(_OriginalUnits, MarginalLogQEI):
    """:class:`~orthobench.acquisition.MarginalLogQEI` in the model's original outcome units."""

    #: :func:`marginal_log_ei`'s ``q``: the base samples have ``q`` columns beyond its pending points.
    built_q: int

    def _columns(self, X: Tensor) -> slice:
        # Too few base-sample columns (fixed at construction) call for a rebuild: say with which q.
        try:
            return super()._columns(X)
        except ValueError as err:
            pending = 0 if self.X_pending is None else self.X_pending.shape[-2]
            short = pending + X.shape[-2] - self.base_samples.shape[-1]
            raise ValueError(
                f"{str(err).rstrip('.')}; build it with marginal_log_ei(..., q={self.built_q + short})."
            ) from None


def _outcome_scale(model: SingleTaskGP) -> tuple[float, float]:
    """``(y_mean, y_std)`` of ``model``'s outcome transform (``(0, 1)`` without one), after
    checking that :func:`~orthobench.surrogates.laplace.laplace_posterior` and
    :class:`~orthobench.surrogates.theta_sampled_gp.ThetaSampledGP` handle the model.

    Raises:
        ValueError: one line naming what is unsupported.
    """
    name = type(model).__name__
    if not isinstance(model, SingleTaskGP):
        raise ValueError(f"marginal_log_ei needs a botorch SingleTaskGP, but got {name}.")
    train_x = model.train_inputs[0]
    if model.num_outputs != 1 or train_x.ndim != 2:
        raise ValueError(
            f"marginal_log_ei supports a single-output, non-batched SingleTaskGP, but got "
            f"num_outputs={model.num_outputs} and train inputs of shape {tuple(train_x.shape)}."
        )
    if type(model.likelihood) is not GaussianLikelihood:
        raise ValueError(
            f"marginal_log_ei needs an inferred-noise GaussianLikelihood (no train_Yvar), but got "
            f"{type(model.likelihood).__name__}."
        )
    if type(model.mean_module) is not ConstantMean:
        raise ValueError(
            f"marginal_log_ei needs a ConstantMean mean module, but got {type(model.mean_module).__name__}."
        )
    if getattr(model, "input_transform", None) is not None:
        raise ValueError(
            f"marginal_log_ei does not support input transforms, but the model has "
            f"{type(model.input_transform).__name__}; scale the inputs yourself (e.g. to the unit cube)."
        )
    every_dim = torch.arange(train_x.shape[-1])
    for kernel in model.covar_module.modules():
        dims = kernel.active_dims if isinstance(kernel, Kernel) else None
        if dims is not None and not torch.equal(dims.cpu(), every_dim):
            raise ValueError(
                f"marginal_log_ei needs a kernel on every input dimension, but "
                f"{type(kernel).__name__} has active_dims={dims.tolist()}."
            )
    try:
        theta_layout(model)
    except UnsupportedError as err:
        raise ValueError(f"marginal_log_ei: unsupported model: {err}") from None
    tf = getattr(model, "outcome_transform", None)
    if tf is None:
        return 0.0, 1.0
    if type(tf) is not Standardize or tf._m != 1 or tf._outputs is not None:
        what = " ".join(repr(tf).split())  # a module's repr spans a line per submodule
        raise ValueError(
            f"marginal_log_ei supports no outcome transform or Standardize(m=1), but got {what}."
        )
    return float(tf.means.squeeze()), float(tf.stdvs.squeeze())


def _check_arguments(
    model: SingleTaskGP,
    estimator: ThetaEstimator,
    theta_samples: int,
    q: int,
    alpha: float,
    best_f: float | Tensor | None,
    X_pending: Tensor | None,
    seed: int | None,
) -> None:
    """Refuse bad arguments of :func:`marginal_log_ei` before its Laplace posterior (a Hessian).

    Raises:
        ValueError: one line naming the argument and its value.
    """
    if not is_integer(theta_samples) or theta_samples < 1:
        raise ValueError(f"`theta_samples` must be an int >= 1, but got {theta_samples=}.")
    fewest = 1 if estimator.point_set else min_draws(estimator.base)
    if theta_samples < fewest:
        raise ValueError(
            f"`theta_samples` must be >= {fewest} for estimator {estimator.name!r}, but got "
            f"{theta_samples=}."
        )
    try:
        # OrthoBOSampler's bound (OrthoBO's `theta_samples` is a Count): 10**7 ran out of memory.
        check_value(Count, int(theta_samples), field="theta_samples")
        check_even_budgets(estimator, {"theta_samples": int(theta_samples)})
    except ConfigError as err:
        raise ValueError(f"`{err.field}` {err.reason}") from None
    if not is_integer(q) or q < 1:
        raise ValueError(f"`q` must be an int >= 1, but got {q=}.")
    if not 0 < alpha <= 1:
        raise ValueError(f"`alpha` must be in (0, 1], but got {alpha=}.")
    if seed is not None and not is_integer(seed):
        raise ValueError(f"`seed` must be an int or None, but got {seed=}.")
    if best_f is not None:
        if torch.as_tensor(best_f).numel() != 1:
            raise ValueError(f"`best_f` must be a scalar, but got {best_f!r}.")
        if not math.isfinite(float(torch.as_tensor(best_f).reshape(()))):
            raise ValueError(f"`best_f` must be finite, but got best_f={float(best_f)}.")
    if X_pending is None:
        return
    d = model.train_inputs[0].shape[-1]
    if X_pending.ndim != 2 or X_pending.shape[-1] != d:
        raise ValueError(
            f"`X_pending` must be p x d with d = {d}, but got shape {tuple(X_pending.shape)}."
        )
    if q == 1 and len(X_pending):
        raise ValueError(
            f"`X_pending` needs the batch acquisition (q > 1), but got q=1 and X_pending of "
            f"shape {tuple(X_pending.shape)}; pass q=2 or drop it."
        )


def marginal_log_ei(
    model: SingleTaskGP,
    *,
    theta_samples: int = 512,
    estimator: str = DEFAULT_THETA_ESTIMATOR,
    best_f: float | Tensor | None = None,
    q: int = 1,
    seed: int | None = None,
    alpha: float = 1e-3,
    X_pending: Tensor | None = None,
    laplace: LaplacePosterior | None = None,
) -> MarginalLogEI | MarginalLogQEI:
    r"""OrthoBO's marginal log-EI of a fitted ``SingleTaskGP``, as a BoTorch acquisition function.

    With ``q(theta) = N(theta_hat, H^{-1})`` the Laplace approximation around the model's fitted
    (MAP) hyperparameters and ``theta_1..theta_S`` draws of ``estimator``, the acquisition is the
    log of the estimated marginal EI (paper Alg. 1, Eqs. (22) and (24); the estimator's weights
    ``a_s`` come from the draws alone)

    .. math::

        L(x) = \log \max\Big(\sum_s a_s \mathrm{EI}(x; \theta_s),\
            \alpha\, \frac1S \sum_s \mathrm{EI}(x; \theta_s)\Big),
        \qquad \mathrm{EI}(x; \theta) = \mathbb E[(f(x) - f^*)_+ \mid \theta, \mathcal D],

    an estimate of ``log E_q[EI(x; theta)]`` (:class:`~orthobench.acquisition.MarginalLogEI`).
    With ``q > 1`` each draw's EI is batch EI ``E[max_i (f(x_i) - f^*)_+]`` by inner Monte Carlo
    on ``K =`` :data:`~orthobench.acquisition.INNER_SAMPLES` scrambled-Sobol' base samples of its
    own, with BoTorch's qLogEI smoothings (:class:`~orthobench.acquisition.MarginalLogQEI`).

    Units: values are in the model's *original* outcome units, like BoTorch's
    ``LogExpectedImprovement``. The draws work on the model's standardized scale (``y_std`` of
    its ``Standardize``), where ``EI_std = EI / y_std``; ``log(y_std)`` is added back, which is
    exact (every estimator and the floor are linear in the EI values) and changes no gradient.
    At ``q > 1`` the smoothing temperatures act on the standardized scale.

    ``b x 1 x d`` -> ``b`` for ``q = 1`` and ``b x q' x d`` -> ``b`` for ``q > 1`` (``q'`` at most
    ``q``, less any pending points set after this call; see ``q``).
    The draws and base samples are fixed here, so the acquisition is deterministic and
    differentiable in ``X`` for ``optimize_acqf``; a fresh ``seed`` is a fresh estimate.
    Candidates of another dtype than the model's are cast to it. The draws are not module
    tensors, so a ``.to``, ``.double()``, ``.cuda()``, ... that would change the acquisition's
    dtype or device raises an ``UnsupportedError``: build it on a model of that dtype and device.

    Args:
        model: A ``SingleTaskGP`` on ``n x d`` inputs, fitted with ``fit_gpytorch_mll``: one
            output, no batch, inferred noise (``GaussianLikelihood`` with a ``LogNormalPrior``),
            ``ConstantMean``, an RBF or Matern-5/2 kernel (ARD or not, optionally in a
            ``ScaleKernel``) or a linear kernel with ``LogNormalPrior`` priors, on every input
            dimension (no ``active_dims`` subset; BoTorch's default model qualifies), no input
            transform, and no outcome transform or ``Standardize(m=1)``
            (BoTorch's default). Anything else raises a ``ValueError``.
        theta_samples: Budget ``S`` of hyperparameter draws (EI evaluations per candidate), at
            most :data:`~orthobench.config.params.MAX_COUNT` (65536, as OrthoBO's); a
            point-set estimator uses the largest count its rule allows within it, and at least
            one whole rule (more than ``S`` draws when one rule has more points).
        estimator: Estimator name ``<base>[+rb][@sampling]`` (:mod:`orthobench.theta_estimators`);
            default OrthoBO's (``qmc-owen+rb``: scrambled-Sobol' draws with the constant mean
            integrated out). ``"mc"`` is the naive mean of iid draws, ``"orth"`` the paper's.
        best_f: The incumbent ``f^*`` in the model's original outcome units (as BoTorch's
            ``LogExpectedImprovement`` takes it); None: the best training target.
        q: Batch size; ``q > 1`` returns the nested batch acquisition, whose base samples are
            fixed here with ``q + p`` columns (``p`` rows of ``X_pending``): one per point of a
            batch and per pending point. So ``q`` must cover the largest batch it is evaluated
            on, pending points included, other than the ``p`` given here: ``optimize_acqf``'s
            ``q`` (with ``sequential=True`` its last stage evaluates one point with the
            ``q - 1`` chosen before it pending) plus any rows ``set_X_pending`` adds to
            ``X_pending``. Fewer raise a ``ValueError`` naming the ``q`` to build it with.
        seed: Seed of the theta draws (and of the base samples for ``q > 1``); None: one drawn
            from torch's global generator (as BoTorch's samplers do).
        alpha: Relative floor of the outer log, in ``(0, 1]``.
        X_pending: ``p x d`` points whose evaluations are pending (``q > 1`` only: they join every
            batch, so the base samples have ``q + p`` columns); ``0 x d`` is none, as None. The
            ``q = 1`` acquisition refuses pending points (``set_X_pending`` raises
            ``UnsupportedError``, as BoTorch's analytic acquisitions do), so
            ``optimize_acqf(..., sequential=True)`` needs ``q > 1``.
        laplace: The model's Laplace posterior, ``laplace_posterior(model)``, to reuse across
            rebuilds (its Hessian costs more than the draws); None: computed here. It must be
            of this model's layout, fitted hyperparameters and training data.

    Returns:
        A :class:`~orthobench.acquisition.MarginalLogEI` (``q = 1``) or
        :class:`~orthobench.acquisition.MarginalLogQEI` (``q > 1``).

    Raises:
        ValueError: one line naming the unsupported model feature, or the bad argument and its
            value (checked before the Laplace posterior is computed).

    Example:
        >>> import torch
        >>> from botorch.fit import fit_gpytorch_mll
        >>> from botorch.models import SingleTaskGP
        >>> from gpytorch.mlls import ExactMarginalLogLikelihood
        >>> gen = torch.Generator().manual_seed(0)
        >>> X = torch.rand(12, 2, generator=gen, dtype=torch.float64)
        >>> Y = -(X - 0.5).square().sum(-1, keepdim=True)
        >>> model = SingleTaskGP(X, Y)
        >>> _ = fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        >>> acqf = marginal_log_ei(model, theta_samples=64, seed=0)
        >>> acqf(X[:3].unsqueeze(-2)).shape  # b x 1 x d -> b
        torch.Size([3])
        >>> qacqf = marginal_log_ei(model, theta_samples=16, q=2, seed=0)
        >>> qacqf(X[:4].reshape(2, 2, 2)).shape  # b x q x d -> b
        torch.Size([2])
    """
    y_mean, y_std = _outcome_scale(model)
    spec = parse_theta_estimator(estimator)
    _check_arguments(model, spec, theta_samples, q, alpha, best_f, X_pending, seed)
    # Python ints from here on (the check accepts numpy ones): torch's generators and the point
    # sets refuse numpy integers, and derive_seed hashes the repr, which for np.int64(3) is not
    # that of 3, so the same seed would give other base samples.
    theta_samples, q = int(theta_samples), int(q)
    seed = int(torch.randint(0, 2**31 - 1, ()).item()) if seed is None else int(seed)
    if X_pending is not None and not len(X_pending):
        X_pending = None  # no pending points, as Optimizer.ask reads an empty array
    train_y = model.train_targets.detach()
    if best_f is None:
        best = float(train_y.max())
    else:
        best = (float(torch.as_tensor(best_f).reshape(())) - y_mean) / y_std
    if laplace is None:
        laplace = laplace_posterior(model)
    elif not laplace.is_of(model):
        raise ValueError(
            "`laplace` is not this model's Laplace posterior (another layout, fitted "
            "hyperparameters or training data); pass laplace_posterior(model)."
        )
    draws = draw_thetas(laplace, spec, theta_samples, seed=seed)
    gp = ThetaSampledGP(
        laplace.layout,
        draws.theta,
        model.train_inputs[0],
        train_y,
        y_mean=y_mean,
        y_std=y_std,
        constant_mean_variance=draws.constant_mean_variance,
        best_f=best,
    )
    # As OrthoBO: a point set's rule weights are the estimate; the others are estimators.
    common = {
        "estimator": "mc" if spec.point_set else spec.base,
        "alpha": alpha,
        "point_weights": [draws.weights],
    }
    if q == 1:
        acqf: MarginalLogEI | MarginalLogQEI = _MarginalLogEI(
            model, [gp], [draws.z], [1.0], **common
        )
    else:
        columns = q + (0 if X_pending is None else X_pending.shape[-2])
        base_samples = draw_inner_base_samples(
            gp.num_samples, columns, derive_seed(seed, "inner") % (2**31)
        ).to(train_y)
        acqf = _MarginalLogQEI(
            model,
            [gp],
            [draws.z],
            [1.0],
            base_samples=base_samples,
            X_pending=X_pending,
            **common,
        )
        acqf.built_q = q
    acqf.log_outcome_scale = math.log(y_std)
    return acqf
