"""The acquisition-noise probe (:mod:`orthobench.probe.runner`); its public base class of plugin
estimators, :class:`ProbeAcquisition` (:mod:`orthobench.probe.plugins`)."""

from orthobench.probe.plugins import ProbeAcquisition

__all__ = ["ProbeAcquisition"]
