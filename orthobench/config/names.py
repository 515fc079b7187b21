r"""The names a configuration may use, their defaults, and the estimator-name grammar.

One source for the names that suites, the probe and the optimizers accept, so that checking a
configuration needs neither torch nor BoTorch (docs/design.md, "Layers and data flow"). The model
modules take their names from here (``KERNELS = names.KERNELS`` in
:mod:`orthobench.surrogates.gp`); the keys of :data:`orthobench.estimators.ESTIMATORS` and
:data:`orthobench.pointsets.POINT_SETS` are tested to equal :data:`ESTIMATORS` and
:data:`POINT_SETS`. Estimator names: :func:`parse_theta_estimator`, :func:`parse_estimator`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from orthobench.exceptions import ConfigError, UnknownNameError, show_value

__all__ = [
    "DEFAULT_THETA_ESTIMATOR",
    "DEFAULT_TPE_ESTIMATOR",
    "ESTIMATORS",
    "FUNCTION_SAMPLE_ESTIMATORS",
    "KERNELS",
    "LAPLACE_MODES",
    "MAX_CUDA_INDEX",
    "PLUGIN_SEPARATOR",
    "POINT_SETS",
    "PROBE_ACQUISITION_BASE",
    "RB_SUFFIX",
    "THETA_SAMPLING",
    "TPE_ESTIMATORS",
    "ThetaEstimator",
    "check_device",
    "check_kernel",
    "parse_estimator",
    "parse_theta_estimator",
]

#: GP kernels by name (:func:`orthobench.surrogates.gp.make_kernel`).
KERNELS: tuple[str, ...] = ("rbf-iso", "rbf-ard", "matern52-iso", "matern52-ard", "linear")

#: Reductions of ``S`` per-draw values with known-mean controls: the keys of
#: :data:`orthobench.estimators.ESTIMATORS`.
ESTIMATORS: tuple[str, ...] = (
    "mc",
    "orth",
    "orth-ridge",
    "orth-crossfit",
    "orth-quadratic",
    "orth-shrink",
)

#: Point sets with weights: the keys of :data:`orthobench.pointsets.POINT_SETS`.
POINT_SETS: tuple[str, ...] = (
    "iid",
    "antithetic",
    "qmc-sobol",
    "qmc-owen",
    "qmc-owen-line",
    "sr3",
    "sr3-cross",
    "radial-simplex",
    "radial-cross",
    "unscented",
)

#: How equal-weight theta draws are made
#: (:meth:`orthobench.surrogates.laplace.LaplacePosterior.sample_whitened`).
THETA_SAMPLING: tuple[str, ...] = ("iid", "antithetic", "qmc")

#: Hessians of the probe's Laplace ``q(theta)``: eigenvalue-floored (the default) or the raw
#: Hessian where it is positive definite (``keep_raw`` of
#: :func:`orthobench.surrogates.laplace.laplace_posterior`).
LAPLACE_MODES: tuple[str, ...] = ("floored", "unfloored")

#: Suffix of a theta estimator that integrates the GP's constant mean out.
RB_SUFFIX = "+rb"

#: Probe estimators whose noise is over function samples at the MAP fit (BoTorch's qLogEI).
FUNCTION_SAMPLE_ESTIMATORS: tuple[str, ...] = ("qlogei",)

#: Separates the module and the class of a probe's plugin estimator, ``module:attr``
#: (a :class:`orthobench.probe.ProbeAcquisition` subclass, loaded by
#: :func:`orthobench.registry.load_probe_acquisition`).
PLUGIN_SEPARATOR = ":"
#: The base class of the probe's plugin estimators, by import path (imported only to check one).
PROBE_ACQUISITION_BASE = "orthobench.probe.plugins:ProbeAcquisition"

#: Probe estimators of the bootstrap TPE acquisition (the probe's kernel column ``tpe``).
TPE_ESTIMATORS: tuple[str, ...] = ("mc-tpe", "orthobo-tpe")

#: ``orthobo``'s default estimator of the marginal EI: Owen-scrambled Sobol' draws of ``phi`` with
#: the constant mean integrated out, chosen by the best worst state over BO states of four
#: functions and two kernels (docs/estimators.md, README "Choosing the default estimator"). The
#: paper's estimator stays available as ``orth``.
DEFAULT_THETA_ESTIMATOR = "qmc-owen+rb"

#: ``orthobo-tpe``'s default reduction of bootstrap values with known-mean controls, a key of
#: :data:`ESTIMATORS` (also :class:`orthobench.acquisition.MarginalLogEI`'s): shrinkage keeps it
#: within ``1/16`` of naive MC's variance when the controls carry no information
#: (docs/design.md, "Never worse than naive MC").
DEFAULT_TPE_ESTIMATOR = "orth-shrink"


#: The largest CUDA index of a device spec: ``torch.device`` stores the index as an int8 (it
#: reads ``cuda:300`` as ``cuda:44``) and refuses leading zeros.
MAX_CUDA_INDEX = 127
_DEVICE_RE = re.compile(r"auto|cpu|cuda(?::(0|[1-9][0-9]{0,2}))?", re.ASCII)


def check_device(spec: Any, *, field: str = "device") -> str:
    """Return ``spec`` if it is a device spec ``torch.device`` parses (or ``auto``).

    Example:
        >>> check_device("cuda:1")
        'cuda:1'
        >>> check_device("cuda:01")
        Traceback (most recent call last):
        ...
        orthobench.exceptions.ConfigError: device: must be auto, cpu, cuda or cuda:N (N = 0..127), but got str 'cuda:01'.

    Raises:
        ConfigError: with ``field``, for anything else (a trailing newline included).
    """
    match = _DEVICE_RE.fullmatch(spec) if isinstance(spec, str) else None
    if match is None or int(match.group(1) or 0) > MAX_CUDA_INDEX:
        raise ConfigError(
            field,
            f"must be auto, cpu, cuda or cuda:N (N = 0..{MAX_CUDA_INDEX}), but got {show_value(spec)}.",
        )
    return spec


class ThetaEstimator(NamedTuple):
    """A parsed estimator name (:func:`parse_theta_estimator`, :func:`parse_estimator`).

    Attributes:
        base: A name of :data:`ESTIMATORS` or :data:`POINT_SETS`; for the probe, also of
            :data:`FUNCTION_SAMPLE_ESTIMATORS` or :data:`TPE_ESTIMATORS`.
        sampling: A :data:`THETA_SAMPLING` entry for :data:`ESTIMATORS` bases, the rule's name for
            point sets, ``""`` for the probe's other estimators.
        rb: Whether the constant mean is integrated out.
    """

    base: str
    sampling: str
    rb: bool = False

    @property
    def point_set(self) -> bool:
        """Whether the estimate is a weighted rule (``base`` is a point set)."""
        return self.base in POINT_SETS

    @property
    def plugin(self) -> bool:
        """Whether ``base`` is a plugin estimator's ``module:attr`` import path
        (:class:`orthobench.probe.ProbeAcquisition`)."""
        return PLUGIN_SEPARATOR in self.base

    @property
    def name(self) -> str:
        """Canonical name, e.g. ``orth-shrink+rb@qmc`` or ``sr3``."""
        at = "" if self.point_set or self.sampling in ("iid", "") else f"@{self.sampling}"
        return f"{self.base}{RB_SUFFIX if self.rb else ''}{at}"


def check_kernel(name: str, *, field: str = "kernel") -> str:
    """Return ``name`` if it is one of :data:`KERNELS`.

    Raises:
        UnknownNameError: listing :data:`KERNELS`, with ``field``.
    """
    if name not in KERNELS:
        raise UnknownNameError("kernel", name, KERNELS, field)
    return name


def parse_theta_estimator(name: str, *, field: str = "estimator") -> ThetaEstimator:
    """Parse an estimator of the marginal EI ``E_q[EI(x; theta)]``: ``<base>[+rb][@<sampling>]``.

    What the parts mean (:mod:`orthobench.theta_estimators` draws and reduces by them):

    * ``base`` in :data:`ESTIMATORS` (``mc``, ``orth``, ``orth-shrink``, ...): equal-weight draws
      reduced by that estimator; ``@sampling`` in :data:`THETA_SAMPLING` picks the draws (default
      ``iid``).
    * ``base`` in :data:`POINT_SETS` (``sr3``, ``radial-cross``, ``qmc-owen``, ...): the rule's
      weighted sum. A rule fixes its own points, so it takes no ``@sampling``.
    * :data:`RB_SUFFIX` (``+rb``): the constant mean integrated out (docs/design.md,
      "Rao-Blackwellization over the constant mean").

    Example:
        >>> parse_theta_estimator("orth-shrink+rb@qmc")
        ThetaEstimator(base='orth-shrink', sampling='qmc', rb=True)
        >>> parse_theta_estimator("sr3").name
        'sr3'

    Raises:
        UnknownNameError: for an unknown base or sampling, naming the known ones, with ``field``.
        ConfigError: for a point set with an ``@sampling`` suffix.
    """
    head, at, sampling = name.partition("@")
    rb = head.endswith(RB_SUFFIX)
    base = head.removesuffix(RB_SUFFIX)
    if base in POINT_SETS:
        if at:
            raise ConfigError(
                field,
                f"point set {base!r} fixes its own points and takes no '@sampling', but got {name!r}.",
            )
        return ThetaEstimator(base, base, rb)
    if base not in ESTIMATORS:
        raise UnknownNameError(
            "estimator",
            base,
            ESTIMATORS + POINT_SETS,
            field,
            f"unknown estimator {base!r} in {name!r}; known: {', '.join(ESTIMATORS)} "
            f"(with @{'|@'.join(THETA_SAMPLING)}) and the point sets {', '.join(POINT_SETS)}, "
            f"each optionally with {RB_SUFFIX!r}.",
        )
    sampling = sampling if at else "iid"
    if sampling not in THETA_SAMPLING:
        raise UnknownNameError(
            "sampling",
            sampling,
            THETA_SAMPLING,
            field,
            f"unknown sampling {sampling!r} in {name!r}; allowed: {', '.join(THETA_SAMPLING)}.",
        )
    return ThetaEstimator(base, sampling, rb)


def parse_estimator(name: str, *, field: str = "estimator") -> ThetaEstimator:
    """Parse a probe estimator name: ``"orth-shrink@qmc"`` -> ``("orth-shrink", "qmc", False)``.

    Theta estimators as :func:`parse_theta_estimator`; the names of
    :data:`FUNCTION_SAMPLE_ESTIMATORS` and :data:`TPE_ESTIMATORS`, which the probe also accepts,
    take no suffix and parse to ``(name, "", False)``, and so does a plugin estimator's
    ``module:attr`` import path (:attr:`ThetaEstimator.plugin`; only its form is checked here,
    the class when the suite is loaded).

    Example:
        >>> parse_estimator("qlogei")
        ThetaEstimator(base='qlogei', sampling='', rb=False)
        >>> parse_estimator("mypkg.acq:QLogNEI64").plugin
        True

    Raises:
        UnknownNameError: for an unknown name, naming all the allowed ones, with ``field``.
        ConfigError: for a suffix on a name that takes none, or an import path whose parts are
            not dotted Python identifiers.
    """
    if PLUGIN_SEPARATOR in name:
        module, _, attr = name.partition(PLUGIN_SEPARATOR)
        if not all(part.isidentifier() for text in (module, attr) for part in text.split(".")):
            raise ConfigError(
                field,
                f"a plugin estimator is a 'package.module:Class' import path of a "
                f"ProbeAcquisition subclass (dotted Python identifiers, no '@sampling'), but "
                f"got {name!r}.",
            )
        return ThetaEstimator(name, "")
    others = FUNCTION_SAMPLE_ESTIMATORS + TPE_ESTIMATORS
    base = name.partition("@")[0]
    if base in others:
        if base != name:
            raise ConfigError(
                field, f"estimator {base!r} takes no '@sampling' suffix, but got {name!r}."
            )
        return ThetaEstimator(base, "")
    hint = (
        "A plugin estimator is a 'module:Class' import path. "
        f"Other estimators: {', '.join(others)}."
    )
    try:
        return parse_theta_estimator(name, field=field)
    except UnknownNameError as err:
        known = err.known + others if err.kind == "estimator" else err.known
        raise UnknownNameError(err.kind, err.name, known, field, f"{err.reason} {hint}") from None
    except ConfigError as err:
        raise ConfigError(field, f"{err.reason} {hint}") from None
