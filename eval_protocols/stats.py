"""Statistics of a policy's trials: mean and standard error, Wilson and bootstrap intervals, tests.

Formulas (also in docs/scoring_sheet.md):
- progress mean = sum(progress_i) / n; standard error = s / sqrt(n) with s the sample
  standard deviation (ddof = 1); undefined (NaN) for n < 2.
- Wilson score interval for k successes of n, z = 1.96 (scipy.stats.binomtest's proportion_ci).
- percentile bootstrap of the progress mean: resample the n trials with replacement, take the
  2.5th and 97.5th percentiles of the resampled means; fixed seed (scipy.stats.bootstrap).
- success vs a reference: Fisher's exact test on the 2x2 table, two-sided.
- progress vs a reference: permutation test of the difference of means, two-sided, fixed seed.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Sequence

import numpy as np

logger = logging.getLogger(__name__)

Z_95 = 1.959963984540054  # standard normal quantile for a two-sided 95% interval (1.96)


def _scipy_stats():
    try:
        import scipy.stats
    except ImportError:
        raise RuntimeError("scipy not found: install the eval extra (pip install 'mqe-deploy[eval]')") from None
    return scipy.stats


def mean_and_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (sample std with ddof=1, over sqrt(n)); SE is NaN for n < 2."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan
    return mean, float(x.std(ddof=1) / math.sqrt(x.size))


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a success rate (scipy's `binomtest(...).proportion_ci`); (0, 1) when
    there are no trials. `z` is the two-sided normal quantile of the confidence level."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    stats = _scipy_stats()
    confidence = 2 * float(stats.norm.cdf(z)) - 1
    interval = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def bootstrap_mean_ci(values: Sequence[float], seed: int, resamples: int = 10_000,
                      confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (scipy's `bootstrap`); NaNs for no data, the value
    itself when every trial scored the same (no spread to resample)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    stats = _scipy_stats()
    result = stats.bootstrap((x,), np.mean, n_resamples=resamples, confidence_level=confidence,
                             method="percentile", vectorized=True,
                             **{_rng_argument(stats.bootstrap): np.random.default_rng(seed)})
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _rng_argument(function) -> str:
    # scipy >= 1.15 names the generator `rng`; older releases (the eval extra allows 1.11) `random_state`.
    return "rng" if "rng" in inspect.signature(function).parameters else "random_state"


def fisher_pvalue(successes_a: int, n_a: int, successes_b: int, n_b: int) -> float:
    """Two-sided Fisher's exact test that two success rates are equal."""
    table = [[successes_a, n_a - successes_a], [successes_b, n_b - successes_b]]
    return float(_scipy_stats().fisher_exact(table, alternative="two-sided").pvalue)


def permutation_pvalue(a: Sequence[float], b: Sequence[float], seed: int, resamples: int = 10_000) -> float:
    """Two-sided permutation test of the difference of means of a and b.

    scipy enumerates every split exactly when there are fewer than `resamples` of them.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        return math.nan

    def diff_of_means(u: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
        return u.mean(axis=axis) - v.mean(axis=axis)

    stats = _scipy_stats()
    result = stats.permutation_test(
        (x, y), diff_of_means, permutation_type="independent", vectorized=True,
        n_resamples=resamples, alternative="two-sided",
        **{_rng_argument(stats.permutation_test): np.random.default_rng(seed)},
    )
    return float(result.pvalue)
