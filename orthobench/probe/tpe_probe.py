r"""The TPE probe: rebuild values of the bootstrap-TPE estimators on one probe state.

The acquisition of :class:`~orthobench.optimizers.tpe.MCTPE` is a mean over ``S`` bootstrap fits
of the density ratio; a rebuild refits the ``S`` bootstraps. ``mc-tpe`` is that mean (the
like-for-like baseline, docs/design.md, "Like-for-like baseline") and ``orthobo-tpe`` the
control-variate estimate on the same fits (paired), whose controls need a known mean
(docs/design.md, "Controls need a known mean"). The reference is the mean over
``reference_samples`` bootstrap fits. Log values are ``log max(h_hat, alpha * h_hat_MC)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from orthobench.optimizers.tpe import MCTPE, OrthoBOTPE
from orthobench.probe.metrics import ALPHA
from orthobench.probe.states import ProbeState
from orthobench.seeding import derive_seed
from orthobench.suite import ProbeSpec


def tpe_values(
    spec: ProbeSpec,
    state: ProbeState,
    names: list[str],
    x: torch.Tensor,
    y: torch.Tensor,
    probes: torch.Tensor,
) -> tuple[dict[tuple[str, int], dict[str, np.ndarray]], dict[str, np.ndarray], dict[str, Any]]:
    """Rebuild values of the TPE estimators ``names`` (a subset of ``mc-tpe``, ``orthobo-tpe``).

    Args:
        x: ``t x d`` history in the unit cube.
        y: ``t`` observed values (minimized).
        probes: ``N x d`` probe points.

    Returns:
        ``{(name, S): {"ei": R x N, "log": R x N}}``, the reference ``{"tpe": N}`` and
        ``{"p": 2 d + 1}`` (the number of controls).
    """
    seed = derive_seed(state.seed, "probe-tpe", state.id)
    out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    reference_opt = MCTPE(
        x.shape[-1],
        seed=seed,
        device=x.device,
        dtype=x.dtype,
        bootstrap_fits=spec.reference_samples,
    )
    reference_opt.tell(x.cpu().numpy(), y.cpu().numpy())
    draw = reference_opt.draw(0)
    reference = reference_opt.values(draw, probes).mean(dim=0).cpu().numpy()
    for s in spec.mc_samples:
        opt = OrthoBOTPE(x.shape[-1], seed=seed, device=x.device, dtype=x.dtype, bootstrap_fits=s)
        opt.tell(x.cpu().numpy(), y.cpu().numpy())
        rows: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {n: ([], []) for n in names}
        # Rebuild 0 keys the reference draw above; rebuilds 1..R are independent of it.
        for r in range(1, spec.rebuilds + 1):
            draw = opt.draw(r)
            values = opt.values(draw, probes)
            mc = values.mean(dim=0)
            estimates = {"mc-tpe": mc, "orthobo-tpe": opt.estimate(draw, values)}
            for name in names:
                rows[name][0].append(estimates[name].cpu().numpy())
                rows[name][1].append(torch.maximum(estimates[name], ALPHA * mc).log().cpu().numpy())
        for name, (ei, log) in rows.items():
            out[(name, s)] = {"ei": np.stack(ei), "log": np.stack(log)}
    return out, {"tpe": reference}, {"p": 2 * x.shape[-1] + 1}
