"""The report's glossary: every metric exactly as computed, with the interval it carries.

Sections name the entries they use (:attr:`orthobench.report.sections.Section.terms`); the
glossary lists those, in order of first use.
"""

from __future__ import annotations

import math

from orthobench.probe.intervals import MAX_RATIO
from orthobench.probe.tables import MAX_REFERENCE_ERROR
from orthobench.report.aggregate import N_TARGETS

_MAX_EXPONENT = round(math.log10(MAX_RATIO))

GLOSSARY: dict[str, str] = {
    "best-so-far regret": (
        "At each evaluation, the lowest noise-free objective value among the points evaluated so "
        "far minus the known global minimum (the regret column). Lower is better."
    ),
    "best-so-far objective": (
        "For tasks without a known optimum (cnn, wm811k-vit): the lowest observed y so far "
        "(the best_y column), shown instead of the regret. A task on which no evaluation was "
        "feasible has neither value; its metric reads best_y, as the stored results do not say "
        "whether its optimum is known."
    ),
    "mean [95% CI]": (
        "Mean over seeds with the Student-t interval mean ± t(0.975, n-1) · s / sqrt(n) "
        "(scipy.stats.t), s the sample standard deviation (ddof 1), cut at 0 for regrets (a mean "
        "regret cannot be negative). No interval with one seed. "
        "Curves are trimmed to each optimizer's shortest seed, so every point averages the same "
        "seeds; rows before a seed's first finite evaluation are left out."
    ),
    "outlier evaluation": (
        "An evaluation the task flagged as an outlier (is_outlier, e.g. a CNN run whose training "
        "was cut short); marked with x on the curves, counted in the final table (over the "
        "row's seeds)."
    ),
    "cumulative seconds": (
        "Per seed, the running sum of fit, acquisition and evaluation seconds up to each "
        "evaluation, a BO step's fit and acquisition counted once for its q points; the curve's "
        "x is its mean over seeds at that evaluation. Evaluations run at once count each: "
        "this is compute, not wall time."
    ),
    "q (points per BO step)": (
        "The points a cell's optimizer proposes per BO step and evaluates at once (a batch); a "
        "cell makes n_init + q · budget evaluations. An optimizer run with q other than 1 is "
        "reported as its own method, labelled 'optimizer (q=k)'."
    ),
    "BO step (batch)": (
        "Batch 0 is the initial design, batch k the q evaluations the k-th BO step proposed. "
        "Per BO step, a seed's value at step k is its best-so-far value at the end of the step "
        "(after all q evaluations); curves are trimmed to the seed with the fewest steps. An "
        "asynchronous cell's steps are its asks and its rows are stored as evaluations "
        "finished: an evaluation counts at step k once it and every evaluation stored before "
        "it were asked by step k."
    ),
    "BO steps": (
        "The BO steps behind a row (the initial design is none). 'BO steps (all seeds)' in "
        "'Runtime per BO step': the steps of all the row's seeds together (steps times seeds), "
        "those its means and standard deviations are over. 'BO steps' in 'Wall time per BO "
        "step': the steps of the row's seed with the most. In the OrthoBO diagnostics: the "
        "steps of the row's seed that recorded OrthoBO diagnostics."
    ),
    "feasible share": (
        "On a constrained task, the share of a cell's evaluations (initial design included) "
        "that are feasible: they gave a value (status ok: a finite y and finite constraint "
        "values) and every constraint value was at most 0; a failed evaluation counts as "
        "infeasible. A seed's share, then the median and range over seeds."
    ),
    "first feasible evaluation": (
        "The number (from 1, initial design included) of a cell's first feasible evaluation: "
        "one that gave a value (status ok: a finite y and finite constraint values) and met "
        "every constraint; until then it has no best-so-far value or regret."
    ),
    "wall seconds": (
        "Seconds of a cell's running time at which an evaluation finished (fits, acquisitions "
        "and evaluations; evaluations run at once overlap). Against wall seconds, a seed's value "
        "at time t is the best-so-far value of the last evaluation that had finished by t "
        "together with every evaluation stored before it; each seed is read at every seed's "
        "times, up to the time the first seed finished, and seeds with no evaluation finished "
        "yet are left out of the mean."
    ),
    "wall time per BO step": (
        "Per seed, the largest wall seconds of each BO step minus that of the step before "
        "(step 1 from the end of the initial design), averaged over the seed's BO steps; the "
        "table gives the median and [min, max] over seeds, so the spread is between seeds. Fit "
        "and acquisition seconds of a step: the largest of its evaluations' rows; their median "
        "over all BO steps of all seeds. One evaluation: median evaluation seconds over all BO "
        "evaluations."
    ),
    "final value": (
        "The last best-so-far value of a seed (regret, or objective without a known optimum), "
        "not trimmed."
    ),
    "rank": (
        "Rank among the optimizers of a task and run set (1 = best; ties share the smaller "
        "rank): first by the share of an optimizer's seeds without a final value (a seed that "
        "never found a feasible point, whose every evaluation failed, or whose cell failed and "
        "stored nothing: see the failed cells), smaller first, then "
        "by the mean final value, lower first. The mean is over the seeds with a final value, "
        "so without the first key the seeds an optimizer failed on would not count against it; "
        "one with no final value on any seed ranks last (and counts so in the mean rank). On a "
        "task where no optimizer has a final value none is ranked ('-')."
    ),
    "Wilcoxon signed-rank, Holm": (
        "Every optimizer of a seed starts from the same initial design, so two optimizers (or a "
        "baseline and a new run) are compared seed by seed: the differences of their final "
        "values on the seeds both have (the pairs) go into the two-sided Wilcoxon signed-rank "
        "test (scipy.stats.wilcoxon; exact null distribution, or the exact distribution over "
        "all sign flips when |differences| tie). Equal final values (zero differences) carry no "
        "sign and are dropped (Wilcoxon's zero method). Then Holm's step-down correction over "
        "the comparisons of one task; * marks a corrected p < 0.05. With n nonzero differences "
        "no p-value can be below 2 / 2^n (0.25 for 3 seeds, 0.0625 for 5, 0.03125 for 6): "
        "where that minimum is not below 0.05 the table says 'too few seeds for a test' and the "
        "CSV has p_value NaN, testable False and the minimum in p_min; such comparisons are "
        "left out of the Holm correction."
    ),
    "evaluations per seed": (
        "The evaluations a seed's cell made, initial design and failed evaluations included "
        "(n_init + q · budget once finished); the final table shows the most of any seed (the "
        "evaluations column)."
    ),
    "failed evals": (
        "Evaluations that gave no value, summed over all seeds of a final-table row (the "
        "failed_evals column), those without a final value included: status invalid (a "
        "non-finite y or constraint value, or one beyond the range of the suite's dtype, as "
        "1e39 in float32) or timeout (a run past the suite's "
        "evaluation_timeout_s). They are not told to the optimizer and cannot be feasible."
    ),
    "fallbacks": (
        "Steps whose optimizer recorded a numerical fallback (the fallback column): a GP fit "
        "that kept its initialization, a Laplace Hessian that was not positive definite, "
        "Cholesky jitter. The final table sums them over the row's seeds."
    ),
    "normalized score": (
        "Per seed 100 · (r_Sobol − r) / r_Sobol, r the final regret and r_Sobol the final "
        "regret of the run set's Sobol optimizer on the task and the same seed (same initial "
        "design): equal to (f_Sobol − f) / (f_Sobol − f*). 100 is the optimum, 0 Sobol's level, "
        "negative worse than Sobol. A ratio per seed, unbounded below where Sobol's regret is "
        "small, so the median over seeds is shown, with the distribution-free 95% interval of "
        "the median (order statistics, scipy.stats.quantile_test; it carries Sobol's "
        "seed-to-seed variation too): none below 6 seeds, the range of the seeds from 6 to 8 "
        "(which covers the median with probability at least 0.969). Seeds where Sobol's regret "
        "is 0, and seeds without a final value (a failed cell's included), are left out."
    ),
    "mean rank": (
        "The rank of the final table on each task (see rank), averaged over the tasks (the "
        "tasks column); a task where no optimizer has a final value ranks none and is left out "
        "for every optimizer."
    ),
    "ECDF of evaluations to target": (
        f"COCO-style runtime distribution: per task, {N_TARGETS} targets from the median "
        "best-so-far value at the end of the initial design down to the best final value of any "
        "run (log-spaced for regrets, else evenly). The curve is the share of (task, seed, "
        "target) triples whose target the optimizer's best-so-far value has reached by each "
        "evaluation, up to the optimizer's own last evaluation; a seed whose cell failed and "
        "stored nothing reaches none of its targets."
    ),
    "fit / acquisition / evaluation seconds": (
        "Seconds per BO step spent fitting the surrogate (Hessians included), building and "
        "maximizing the acquisition, and evaluating the task; initial-design steps left out. "
        "A step of q points fits and acquires once; its evaluation seconds are the mean over "
        "its q evaluations: the step's time when they run at once. Where they ran one after "
        "another (inline, or more points than workers) the step took longer: 'Wall time per BO "
        "step' gives the measured time."
    ),
    "eigenvalue floored": (
        "BO steps where some eigenvalue of the Laplace Hessian was raised to the floor (routine "
        "for unidentified ARD lengthscales; docs/design.md, 'Indefinite Hessians and the "
        "eigenvalue floor')."
    ),
    "indefinite Hessian": (
        "BO steps whose raw Laplace Hessian had an eigenvalue <= 0: a recorded fallback."
    ),
    "jittered draws": (
        "Theta draws whose GP covariance needed Cholesky jitter to factor, summed over the "
        "ensemble members and BO steps of the row's seed; a step with any records a fallback."
    ),
    "min raw eigenvalue": (
        "The smallest eigenvalue of the raw Laplace Hessian (before the eigenvalue floor) over "
        "every ensemble member and BO step of the row's seed; <= 0: some step's Hessian was "
        "indefinite. '-' where none was stored finite."
    ),
    "ensemble entropy": (
        "Shannon entropy −Σ π log π (nats) of the ensemble weights after the step; log M for "
        "equal weights over M kernels, 0 for a single model."
    ),
    "probe state": (
        "A fixed BO history (shared Sobol design of n0 points plus the given number of steps of "
        "the state optimizer) with its surrogate fitted once and left untouched."
    ),
    "rebuild": (
        "A fresh draw of the S theta samples (or function samples, or bootstrap fits) with the "
        "surrogate unchanged; estimators of one rebuild share their draws (common random "
        "numbers)."
    ),
    "probe variance": (
        "For each of the N probe points, the sample variance (ddof 1) of the estimate across the "
        "R rebuilds, averaged over points; mean over states. 'EI' is on the GP's standardized "
        "outcome scale; 'log' is of the outer-log acquisition log max(EI_hat, 0.001 EI_hat_MC)."
    ),
    "bias²": (
        "Mean over points of (mean over rebuilds − reference)², the reference being the same "
        "target at high precision; bias²/MSE is its share of the MSE (about 1/R when unbiased), "
        "mean over states."
    ),
    "EI evals": (
        "EI evaluations behind one estimate: S for sampled estimators, the rule's real point "
        "count for point sets, whose baseline is naive MC with that many draws."
    ),
    "variance / MSE ratio": (
        "Baseline's probe variance (MSE against its own reference) divided by the estimator's "
        "on one state, at the same number of EI evaluations; the baseline is naive iid theta-MC "
        "(mc-tpe for TPE). Above 1: the estimator is better. Over states: the geometric mean "
        "exp(mean log ratio)."
    ),
    "CI over states": (
        "Which interval a probe row shows ('CI over'). With several states ('states'): for the "
        "geometric mean, the 95% Student-t interval of the mean log ratio over states, "
        "exponentiated (exact for lognormal ratios); for the median, the distribution-free "
        "order-statistic interval, whose exact coverage is in 'its level' (below 6 states it is "
        "the range of the states: 0.5 with 2, 0.75 with 3, 0.9375 with 5). Both cover the "
        "spread between states, which the rebuild intervals of one state do not. With one state "
        "('rebuilds'): that state's 95% percentile bootstrap over paired rebuilds (2000 "
        "resamples, seeded)."
    ),
    "worst state": (
        "The smallest ratio of any single state, with that state's 95% rebuild interval "
        "(percentile bootstrap over its paired rebuilds); 'which state' names it."
    ),
    "undefined states": (
        "Per ratio, the states where it is undefined: NaN, not positive, infinite or outside "
        f"[1e-{_MAX_EXPONENT}, 1e{_MAX_EXPONENT}] (one estimator's variance is about 0 there, so the "
        "ratio measures round-off, not a variance reduction). 'undefined states (var ratio)' "
        "counts those of the variance ratio, left out of its geometric mean and worst state; "
        "'undefined states (MSE ratio)' those of the MSE ratio, left out of its median, worst "
        "state and geometric mean. A state can be undefined for one ratio and not the other."
    ),
    "unconverged reference states": (
        "The states left out of the MSE ratios (median, worst state, geometric mean) because "
        "their reference is not converged: its estimated squared error exceeds "
        f"{MAX_REFERENCE_ERROR:g} of its mean square (a rare event, as an EI that a few of the "
        "reference's draws carry), so an MSE against it would score agreement with the "
        "reference's own error. Variance ratios do not read the reference and keep these "
        'states (docs/design.md, "The probe\'s reference and its error").'
    ),
    "probe ranking": (
        "One row per budget S and estimator over every (task, kernel) of a run set. 'worst state "
        "MSE ratio': the smallest MSE ratio of any single state, named in 'worst state' "
        "(task/kernel and seed), with that state's upper 95% rebuild bound ('upper rebuild "
        "CI'); 'median': the median over (task, kernel) of each one's median over states; "
        "'worst median': the smallest of those medians, in 'worst cell'; 'max excess "
        "bias²/MSE': the largest over states of max(bias² − probe variance / R, 0) / MSE, the "
        "share of the MSE that is bias beyond what R rebuilds leave in an unbiased estimator's "
        "bias² (about 0 when unbiased). Rows are sorted by the worst state, best first."
    ),
    "median point ratio": (
        "Median over probe points of the per-point ratio (shows whether a few heavy-tailed "
        "points carry the mean); geometric mean over the states where it is defined (see "
        "undefined states; the CSV's median_point_mse_ratio_undefined counts the others)."
    ),
    "top-1 agreement": (
        "Share of rebuilds whose highest-ranked probe is a highest-ranked probe of the "
        "reference (any of them where the reference ties); mean over states."
    ),
    "flip rate": (
        "Over the k-1 adjacent pairs among the reference's top-k probes (k = 10 by default) and "
        "all rebuilds, the share whose order is reversed; a pair the reference ties is left out "
        "(a state where every pair ties has none); mean over the states that have one."
    ),
    "regret (probe)": "Best-so-far regret of the probe state's history, mean over states.",
    "verdict": (
        "Per compared set, task and optimizer, one line: 'identical' (every y of the common "
        "cells the same), 'better' or 'worse' (the signed-rank test over the paired seeds, "
        "Holm p < 0.05, read in the direction of its statistic: better is lower), 'no detected "
        "change', 'equal final values', 'too few seeds for a test', 'not compared' (common "
        "cells ran another number of evaluations), 'new: not in the baseline', 'only in the "
        "baseline' or 'no finite final value' on a side. Cells that failed in the new set and "
        "not in the baseline lead it with 'worse: N cells failed in the new set', then the "
        "verdict on the other cells."
    ),
    "new - base": (
        "A cell's final value in the compared set minus its final value in the baseline (lower "
        "is better: negative means the new set ended lower); '-' where a side has none."
    ),
    "identical y": (
        "Every observed y of the cell is the same in both result sets (same length, NaN equal to "
        "NaN). Runs are deterministic for a given library version and thread count. '-' (empty "
        "in the CSV's identical column) where the cell is not stored in both sets: only in one, "
        "or failed and stored nothing in one."
    ),
    "max |dy|": (
        "The largest |y new - y base| over a cell's evaluations in stored order (0 where both "
        "failed; 0 for identical y); '-' where the cell is not stored in both sets, ran another "
        "number of evaluations in each, or no evaluation compares (each failed on one side)."
    ),
}
