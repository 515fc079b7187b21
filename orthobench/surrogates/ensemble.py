r"""An ensemble of GP surrogates with tempered exponentially weighted aggregation.

Each member is a GP (any kernel of :data:`orthobench.surrogates.gp.KERNELS`) with its Laplace
posterior over hyperparameters. After every new observation ``(x_{t+1}, y_{t+1})`` the weights
are updated from each member's predictive log score ``l_m``, the log predictive density of the
new observation under member ``m`` *as fitted before it arrived* (paper Eq. (23),
[Freund1997]_ with the floor of [Herbster1998]_):

.. math::

    \tilde\pi_m \propto \pi_m \exp(l_m / \tau), \qquad
    \pi_m^{\text{new}} \propto \max(\delta, \tilde\pi_m).

NOTE: the floor is applied to the *normalized* exponential weights ``tilde pi``. Applied to the
unnormalized products ``pi_m exp(l_m / tau)`` as Eq. (23) is printed, it would depend on the
units of ``y`` (log densities shift by ``-log(scale)``): with every ``l_m`` below
``tau log(delta)`` all weights would hit the floor and the update would reset to uniform
whatever the scores say. Normalizing first makes the update invariant to a common shift of the
scores, which is what a weight floor is for.

References:
    .. [Freund1997] Y. Freund, R. E. Schapire. A Decision-Theoretic Generalization of On-Line
       Learning and an Application to Boosting. JCSS 1997.
    .. [Herbster1998] M. Herbster, M. K. Warmuth. Tracking the Best Expert. Machine Learning 1998.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from botorch.models import SingleTaskGP

from orthobench.config.names import check_kernel
from orthobench.diagnostics import EnsembleWeights
from orthobench.exceptions import NumericsWarning
from orthobench.surrogates.fit import FITS, fit_model
from orthobench.surrogates.laplace import LaplacePosterior, laplace_posterior


def check_weight_floor(delta: float, members: int) -> None:
    """The weight floor of ``M = members`` weights is in ``[0, 1/M)``: it is a share of weights
    that sum to one, and ``M`` floors of ``1/M`` or more would take all of it.

    Raises:
        ValueError: naming ``delta`` and ``M``.
    """
    if not 0 <= delta < 1.0 / members:
        raise ValueError(
            f"`0 <= delta < 1/M` must hold for the M ensemble members, but got ({delta=}, "
            f"M={members})."
        )


def update_weights(
    weights: torch.Tensor, log_scores: torch.Tensor, *, tau: float, delta: float
) -> torch.Tensor:
    r"""One tempered exponential-weights step with a floor: ``M`` weights, ``M`` scores -> ``M``.

    ``tilde pi = softmax(log pi + l / tau)``, then ``pi_new = max(delta, tilde pi) / sum``.

    A score of ``-inf`` (a predictive density that underflowed) gives its member
    ``tilde pi = 0``, so the floor; an update where no member keeps a finite ``log pi + l / tau``
    (all scores ``-inf``, or the only weighted members' ones) keeps the weights. Both are warned
    about (:class:`~orthobench.exceptions.NumericsWarning`; :meth:`SurrogateEnsemble.update`
    also records them).

    Args:
        weights: ``M`` current weights (non-negative, summing to one).
        log_scores: ``M`` predictive log scores ``l_m`` (finite or ``-inf``).
        tau: Temperature ``> 0``; larger is slower.
        delta: Weight floor in ``[0, 1 / M)``.

    Returns:
        ``M`` new weights summing to one.
    """
    new, fallback = _update_weights(weights, log_scores, tau=tau, delta=delta)
    if fallback:
        warnings.warn(f"Ensemble weights: {fallback}.", NumericsWarning, stacklevel=2)
    return new


def _update_weights(
    weights: torch.Tensor, log_scores: torch.Tensor, *, tau: float, delta: float
) -> tuple[torch.Tensor, str | None]:
    """:func:`update_weights` and its fallback (None: none), unwarned."""
    if not tau > 0:
        raise ValueError(f"`tau` must be positive, but got {tau=}.")
    check_weight_floor(delta, weights.shape[-1])
    if weights.shape != log_scores.shape:
        raise ValueError(
            f"`weights` and `log_scores` must have the same shape, but got {tuple(weights.shape)} and {tuple(log_scores.shape)}."
        )
    if log_scores.isnan().any() or log_scores.isposinf().any():
        raise ValueError(f"`log_scores` must be finite or -inf, but got {log_scores.tolist()}.")
    fallback = None
    if log_scores.isneginf().any():
        members = log_scores.isneginf().nonzero().flatten().tolist()
        fallback = (
            f"log score -inf (predictive density underflowed) for member(s) {members}; their "
            f"weights fell to the floor {delta=:g}"
        )
    logits = weights.log() + log_scores / tau
    if logits.isposinf().any() or not logits.isfinite().any():
        # ``l / tau`` overflowed (a tiny tau): the same step with the scores shifted by their
        # largest, exact in exact arithmetic (softmax ignores a common shift).
        logits = weights.log() + (log_scores - log_scores.max()) / tau
    if not logits.isfinite().any():
        # Every member with weight scored -inf: softmax would be NaN and the scores say nothing.
        return weights / weights.sum(), (
            f"no member has a usable log score (weights {weights.tolist()}, scores "
            f"{log_scores.tolist()}); kept the weights"
        )
    floored = torch.softmax(logits, dim=-1).clamp_min(delta)
    return floored / floored.sum(), fallback


def weight_entropy(weights: torch.Tensor) -> float:
    """Shannon entropy ``-sum pi log pi`` (nats) of ``M`` weights; 0 for a single model."""
    w = weights[weights > 0]
    return float((w * w.reciprocal().log()).sum())


def _laplace_to(laplace: LaplacePosterior, device: torch.device) -> LaplacePosterior:
    """``laplace`` with its tensors on ``device`` (its cached decomposition is recomputed there)."""
    return dataclasses.replace(
        laplace,
        theta_hat=laplace.theta_hat.to(device),
        hessian=laplace.hessian.to(device),
        raw_eigenvalues=laplace.raw_eigenvalues.to(device),
        theta_map=laplace.theta_map.to(device),
    )


@dataclass(frozen=True)
class EnsembleMember:
    """One fitted member: kernel name, MAP-fitted BoTorch model, Laplace posterior, fit record."""

    kernel: str
    model: SingleTaskGP
    laplace: LaplacePosterior
    fit_info: dict[str, object]


class SurrogateEnsemble:
    """``M`` GP surrogates (one per kernel name) and their aggregation weights.

    Call :meth:`fit` on each BO step, and :meth:`update` with the members' predictive log scores
    of the observation that arrived since the last fit.

    Args:
        kernels: Kernel names, one member each (repeats allowed).
        tau: Temperature of the weight update.
        delta: Weight floor.
        fit: MAP fit of the members, one of :data:`orthobench.surrogates.fit.FITS`.
    """

    def __init__(
        self, kernels: Sequence[str], *, tau: float = 1.0, delta: float = 1e-3, fit: str = "botorch"
    ) -> None:
        if len(kernels) == 0:
            raise ValueError("An ensemble needs at least one kernel, but got none.")
        for i, kernel in enumerate(kernels):
            check_kernel(kernel, field=f"kernels[{i}]")
        if fit not in FITS:
            raise ValueError(f"`fit` must be one of {FITS}, but got {fit!r}.")
        self.kernels = tuple(kernels)
        self.fit_method = fit
        self.tau = tau
        self.delta = delta
        # Validates tau and delta once, before any data arrives.
        update_weights(
            torch.full((len(kernels),), 1.0 / len(kernels)),
            torch.zeros(len(kernels)),
            tau=tau,
            delta=delta,
        )
        self.weights = torch.full((len(kernels),), 1.0 / len(kernels), dtype=torch.float64)
        self.members: list[EnsembleMember] = []
        #: What the last :meth:`update` fell back on (:func:`update_weights`), or None.
        self.fallback: str | None = None

    @property
    def entropy(self) -> float:
        return weight_entropy(self.weights)

    def fit(
        self,
        train_x: torch.Tensor,
        train_y: torch.Tensor,
        warm_starts: Sequence[Sequence[float]] | None = None,
        *,
        device: torch.device | None = None,
    ) -> list[EnsembleMember]:
        """MAP-fit every member on ``t x d`` inputs and ``t`` targets (larger is better) and build
        its Laplace posterior. Replaces :attr:`members`.

        ``warm_starts``: one theta per member (a previous fit's), extra starts of a ``"fast"`` fit.
        ``device``: where the fits and Laplace posteriors are computed (default: the data's);
        the members are then moved to the data's device.
        """
        if warm_starts is not None and len(warm_starts) != len(self.kernels):
            raise ValueError(
                f"Expected {len(self.kernels)} warm starts (one per member), but got {len(warm_starts)}."
            )
        home = train_x.device
        device = home if device is None else device
        members = []
        for i, kernel in enumerate(self.kernels):
            model, info = fit_model(
                train_x.to(device),
                train_y.to(device),
                kernel,
                fit=self.fit_method,
                warm_start=None if warm_starts is None else warm_starts[i],
            )
            laplace = laplace_posterior(model)
            if device != home:
                model, laplace = model.to(home), _laplace_to(laplace, home)
            members.append(
                EnsembleMember(kernel=kernel, model=model, laplace=laplace, fit_info=info)
            )
        self.members = members
        return members

    def update(self, log_scores: Sequence[float] | torch.Tensor) -> torch.Tensor:
        """Update the weights from ``M`` predictive log scores (see :func:`update_weights`); a
        fallback is warned about and kept in :attr:`fallback` until the next update."""
        # Scores may come from a GPU model; the weights live on the CPU.
        scores = torch.as_tensor(log_scores).to(
            dtype=self.weights.dtype, device=self.weights.device
        )
        self.weights, self.fallback = _update_weights(
            self.weights, scores, tau=self.tau, delta=self.delta
        )
        if self.fallback:
            warnings.warn(f"Ensemble weights: {self.fallback}.", NumericsWarning, stacklevel=2)
        return self.weights

    def diagnostics(self) -> EnsembleWeights:
        """The kernels, weights and entropy, as stored in a step's info."""
        return EnsembleWeights(
            kernels=self.kernels,
            weights=tuple(float(w) for w in self.weights),
            entropy=self.entropy,
            max_entropy=math.log(len(self.kernels)),
        )
