r"""Plugin estimators of the probe: a user's acquisition, probed beside OrthoBO's estimators.

A probe section names one by import path (``estimators: [mc, orth, "mypkg.acq:QLogNEI64"]``);
the path must name a subclass of :class:`ProbeAcquisition`, checked when the suite is loaded
(:func:`orthobench.registry.load_probe_acquisition`, the registry's trust model: a suite names code
to import, and only classes of the right base may be loaded from it). The probe measures it as it
measures ``qlogei`` (:mod:`orthobench.probe.gp_probe`): its noise is over whatever the plugin
seeds with the rebuild index, on the state's fitted GP, against its own high-precision reference.

This module imports neither torch nor BoTorch, so a suite naming a plugin validates without them
(the plugin's own module may import them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["ProbeAcquisition"]


class ProbeAcquisition(ABC):
    r"""Base class of a probe's plugin estimator: builds one rebuild of a log acquisition.

    The probe instantiates the subclass a suite names with no arguments and, for each budget
    ``S`` of ``mc_samples`` and rebuild ``r < rebuilds`` of a GP state, calls
    ``build(model, best_f=f*, samples=S, rebuild=r)`` and evaluates the returned acquisition at
    the state's ``N x q x d`` probe points, ``log a_{S,r}(X)``. Its reference is one more build
    with ``samples = reference_samples`` and ``rebuild = rebuilds`` (an index no rebuild uses).
    The probe divides the values by the GP's outcome standard deviation ``sigma_y``, as it does
    ``qlogei``'s, so they share the theta estimators' standardized scale:

    .. math::

        \log \widehat{\mathrm{EI}}_{S,r}(X) = \log a_{S,r}(X) - \log \sigma_y.

    Each ``build`` gets a fresh copy of the fitted model and runs under torch's global RNG
    seeded by the state, the estimator, ``S`` and ``r`` (restored afterwards), so a plugin can
    change neither the other rows nor its own other rebuilds. Seed the plugin's own sampler with
    ``rebuild`` (and ``samples``): that is what makes two rebuilds differ.

    Plugins are probed on unconstrained GP states only: TPE states have no GP, and a constrained
    task is refused at the start of the probe (the plugin gets no constraint models).

    Example:
        >>> import torch
        >>> from botorch.acquisition import qLogNoisyExpectedImprovement
        >>> from botorch.sampling import SobolQMCNormalSampler
        >>> class QLogNEI(ProbeAcquisition):
        ...     def build(self, model, *, best_f, samples, rebuild):
        ...         sampler = SobolQMCNormalSampler(torch.Size([samples]), seed=rebuild)
        ...         X_baseline = model.train_inputs[0]
        ...         return qLogNoisyExpectedImprovement(model, X_baseline, sampler=sampler)
        >>> QLogNEI().build.__name__
        'build'
    """

    @abstractmethod
    def build(
        self, model: Any, *, best_f: float, samples: int, rebuild: int
    ) -> Callable[[Tensor], Tensor]:
        r"""One rebuild of the acquisition.

        Args:
            model:
                The state's fitted BoTorch ``SingleTaskGP`` (MAP hyperparameters, a
                ``Standardize`` outcome transform), maximizing: it is fitted to ``-y``.
            best_f:
                The best observed value of the model's targets, ``max(-y)``, in original
                outcome units (the incumbent of EI).
            samples:
                The Monte Carlo budget ``S`` of the row (``reference_samples`` for the
                reference).
            rebuild:
                The rebuild index ``r`` (``rebuilds`` for the reference): seed the sampler
                with it.

        Returns:
            A log acquisition in the BoTorch LogEI-family convention: ``n x q x d -> n`` log
            values in the model's original outcome units (a BoTorch ``AcquisitionFunction`` or
            any callable).
        """
