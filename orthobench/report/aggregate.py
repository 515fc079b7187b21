r"""Views across tasks: normalized score against Sobol, mean rank, ECDF of runtimes to targets.

* Normalized score (Ax's ``compute_score_trace``, Bayesmark's normalized score): per seed ``s``,
  :math:`100 (r_{Sobol,s} - r_s) / r_{Sobol,s}` with :math:`r_s` the final best-so-far regret and
  :math:`r_{Sobol,s}` the final regret of the run set's Sobol optimizer on the task and the same
  seed (both start from that seed's initial design); 100 is the optimum, 0 Sobol's level.
  Regret is the distance to the optimum, so this is :math:`(f_{Sobol} - f) / (f_{Sobol} - f^*)`.
  A ratio per seed, so its median over seeds is reported, not its mean. Only tasks with a known
  optimum have one.
* Mean rank: the rank of an optimizer among the run set's optimizers on each task (by the share
  of seeds without a final value, then the mean final value:
  :func:`orthobench.report.tables.final_table`), averaged over tasks.
* ECDF of evaluations to target (COCO's runtime distributions): for each task, :data:`N_TARGETS`
  targets between the median best-so-far value at the end of the initial design and the best
  final value of any run, log-spaced when both are positive (regrets), else evenly; the curve of
  an optimizer is the share of (task, seed, target) triples whose target its best-so-far value
  has reached (``<=``) by each evaluation, up to its own last evaluation; the seed of a failed
  cell that stored nothing reaches none of its targets.

The mean rank and the ECDF count a failed cell that stored nothing
(:meth:`orthobench.report.data.ResultSet.crashed`) as a seed without a final value: leaving it
out would rank a method that crashes on its hard seeds by its easy ones. The normalized score, a
ratio per seed, has none for such a seed and leaves it out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orthobench.report import stats
from orthobench.report.tables import KEY

N_TARGETS = 20


def normalized_scores(finals: pd.DataFrame, sobol: dict[str, str]) -> pd.DataFrame:
    r"""Seed-paired score per key: its median over seeds with an order-statistic interval, from
    :func:`~.tables.final_values`.

    Each seed's score :math:`100 (r_{Sobol,s} - r_s) / r_{Sobol,s}` divides by the Sobol run of
    the same seed, which shares the seed's initial design, so the baseline is not treated as
    exact: its seed-to-seed variation is in the per-seed scores. A score is a ratio, unbounded
    below where Sobol's regret on a seed is small (Sobol 0.001 and the optimizer 0.1 score
    -9900), so one seed would carry a mean: the median over seeds is reported, with
    :func:`~orthobench.report.stats.median_interval` (covers the median score over seeds, initial
    designs and both optimizers' randomness, with probability at least 95%; none below 6 seeds).
    Seeds without a finite, positive Sobol regret, or without a finite own regret (a failed
    cell's included), are left out.

    Args:
        finals: Per-seed final values (regret tasks only are scored).
        sobol: ``run_set -> optimizer label`` of the Sobol baseline of each run set.

    Returns:
        Columns: the :data:`~.tables.KEY`, ``seeds`` (scored seeds), ``score`` (median over them),
        ``low``, ``high`` (its 95% order-statistic interval, NaN below 6 seeds), all in
        percent.
    """
    rows = []
    regret = finals[finals["metric"] == "regret"]
    for (run_set, task), group in regret.groupby(["run_set", "task"], sort=True):
        base = group[group["optimizer"] == sobol.get(run_set)][["seed", "final"]]
        base = base[np.isfinite(base["final"]) & (base["final"] > 0)]
        if base.empty:
            continue
        for optimizer, own in group.groupby("optimizer", sort=True):
            paired = own.merge(base, on="seed", suffixes=("", "_sobol"))
            scores = (100.0 * (1.0 - paired["final"] / paired["final_sobol"])).to_numpy(float)
            scores = scores[np.isfinite(scores)]
            rows.append((run_set, task, optimizer, scores.size, *stats.median_interval(scores)))
    return pd.DataFrame(rows, columns=[*KEY, "seeds", "score", "low", "high"])


def mean_ranks(final: pd.DataFrame) -> pd.DataFrame:
    """Per (run set, optimizer): the mean over tasks of :func:`~.tables.final_table`'s rank.

    Columns: ``run_set``, ``optimizer``, ``tasks``, ``mean_rank``.
    """
    ranked = final[final["rank"].notna()]
    table = ranked.groupby(["run_set", "optimizer"], sort=True)["rank"].agg(["size", "mean"])
    return table.rename(columns={"size": "tasks", "mean": "mean_rank"}).reset_index()


def targets(values_at_init: np.ndarray, finals: np.ndarray, n: int = N_TARGETS) -> np.ndarray:
    """``n`` targets from the median of ``values_at_init`` down to the smallest finite final.

    Log-spaced when both ends are positive, else evenly spaced; empty without finite values or
    when nothing improved on the initial design.
    """
    start, finals = values_at_init[np.isfinite(values_at_init)], finals[np.isfinite(finals)]
    if start.size == 0 or finals.size == 0:
        return np.empty(0)
    hi, lo = float(np.median(start)), float(finals.min())
    if not lo < hi:
        return np.empty(0)
    if lo > 0:
        return np.geomspace(hi, lo, n)
    return np.linspace(hi, lo, n)


def ecdf(
    trace: pd.DataFrame, n_targets: int = N_TARGETS, crashed: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Share of (task, seed, target) triples reached by each evaluation, per run set and optimizer.

    ``trace`` is :func:`~.tables.traces`; ``n_targets`` targets per task (:func:`targets`).
    ``crashed`` (:meth:`~orthobench.report.data.ResultSet.crashed`): failed cells that stored no
    rows, whose triples on a task with targets are never reached. Each curve stops at its own
    last evaluation (the most of its trimmed traces), as COCO's runtime distributions stop at a
    method's budget; one whose every cell failed has none, and stays at 0 up to its run set's
    last. Returns columns ``run_set``, ``optimizer``, ``evaluation``, ``reached`` (a share in
    [0, 1]), ``triples``.
    """
    if crashed is None:
        crashed = pd.DataFrame(columns=["run_set", "task", "optimizer"])
    lost = crashed.groupby(["run_set", "task"])["optimizer"].agg(list).to_dict()
    hits = []  # (run_set, optimizer, evaluation at which a triple is reached, or inf)
    for (run_set, task), frame in trace.groupby(["run_set", "task"], sort=True):
        at_init = frame[frame["evaluation"] == frame["n_init"]]["value"].to_numpy(dtype=float)
        last = frame.groupby(["optimizer", "seed"])["value"].last().to_numpy(dtype=float)
        levels = targets(at_init, last, n_targets)
        if levels.size == 0:
            continue
        for (optimizer, _seed), run in frame.groupby(["optimizer", "seed"], sort=True):
            values = run["value"].to_numpy(dtype=float)
            evaluations = run["evaluation"].to_numpy()
            reached = values[None, :] <= levels[:, None]  # targets x evaluations
            first = np.where(reached.any(axis=1), evaluations[reached.argmax(axis=1)], np.inf)
            hits += [(run_set, optimizer, e) for e in first]
        hits += [(run_set, o, np.inf) for o in lost.get((run_set, task), []) for _ in levels]
    if not hits:
        return pd.DataFrame(columns=["run_set", "optimizer", "evaluation", "reached", "triples"])
    hits_frame = pd.DataFrame(hits, columns=["run_set", "optimizer", "first"])
    horizons = trace.groupby(["run_set", "optimizer"])["evaluation"].max()
    run_set_horizons = trace.groupby("run_set")["evaluation"].max()
    rows = []
    for (run_set, optimizer), group in hits_frame.groupby(["run_set", "optimizer"], sort=True):
        first = group["first"].to_numpy(dtype=float)
        horizon = int(horizons.get((run_set, optimizer), run_set_horizons[run_set]))
        for evaluation in range(1, horizon + 1):
            rows.append(
                (run_set, optimizer, evaluation, float(np.mean(first <= evaluation)), first.size)
            )
    return pd.DataFrame(rows, columns=["run_set", "optimizer", "evaluation", "reached", "triples"])
