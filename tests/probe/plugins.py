"""Plugin estimators for the probe tests (by import path: ``tests.probe.plugins:QLogNEI``)."""

from __future__ import annotations

import torch
from botorch.acquisition import qLogNoisyExpectedImprovement
from botorch.sampling import SobolQMCNormalSampler

from orthobench.probe import ProbeAcquisition


class QLogNEI(ProbeAcquisition):
    """BoTorch's qLogNEI on the state's GP, ``samples`` scrambled-Sobol function samples seeded
    by the rebuild index; the baseline is the GP's training inputs (``best_f`` is not used)."""

    def build(self, model, *, best_f, samples, rebuild):
        sampler = SobolQMCNormalSampler(torch.Size([samples]), seed=rebuild)
        return qLogNoisyExpectedImprovement(model, model.train_inputs[0], sampler=sampler)


class Abstract(ProbeAcquisition):
    """A subclass that does not implement ``build``."""


class NeedsArguments(ProbeAcquisition):
    """A subclass the probe cannot build: it takes no arguments."""

    def __init__(self, k):
        self.k = k

    def build(self, model, *, best_f, samples, rebuild):
        raise AssertionError("never called")


class StaticBuild(ProbeAcquisition):
    """A ``build`` that is a static method: it takes no instance."""

    @staticmethod
    def build(model, *, best_f, samples, rebuild):
        raise AssertionError("never called")


class ClassBuild(ProbeAcquisition):
    """A ``build`` that is a class method."""

    @classmethod
    def build(cls, model, *, best_f, samples, rebuild):
        raise AssertionError("never called")


class PositionalBuild(ProbeAcquisition):
    """A ``build`` without the keyword arguments the probe passes."""

    def build(self, model):
        raise AssertionError("never called")


def not_a_plugin(model, *, best_f, samples, rebuild):
    """A plain function of the right signature: not a ProbeAcquisition subclass."""
    raise AssertionError("never called")
