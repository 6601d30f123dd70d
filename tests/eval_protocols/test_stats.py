"""Statistics checked against hand-computed values and independent implementations."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_protocols import stats


def test_mean_and_se_by_hand() -> None:
    # progress 1, 0, 1, 1: mean 0.75; sample variance ((3 * 0.0625) + 0.5625) / 3 = 0.25, sd 0.5; SE 0.5 / 2.
    assert stats.mean_and_se([1, 0, 1, 1]) == pytest.approx((0.75, 0.25))
    mean, se = stats.mean_and_se([0.5])
    assert mean == 0.5 and math.isnan(se)  # one trial: no spread to estimate
    assert all(math.isnan(v) for v in stats.mean_and_se([]))


@given(st.lists(st.integers(0, 4), min_size=2, max_size=30))
def test_se_is_sample_std_over_sqrt_n(points: list[int]) -> None:
    progress = [p / 4 for p in points]
    mean, se = stats.mean_and_se(progress)
    assert mean == pytest.approx(statistics.fmean(progress))
    assert se == pytest.approx(statistics.stdev(progress) / math.sqrt(len(progress)), abs=1e-12)


def test_wilson_by_hand() -> None:
    # 12 of 15, z = 1.96: centre (0.8 + z^2/30) / (1 + z^2/15) = 0.9280533 / 1.2561067 = 0.7388332,
    # half width z * sqrt(0.8 * 0.2 / 15 + z^2 / 900) / (1 + z^2/15) = 0.2395302 / 1.2561067 = 0.1906926.
    assert stats.wilson_interval(12, 15, z=1.96) == pytest.approx((0.5481406, 0.9295258), abs=1e-6)
    # 0 of 10: (0, z^2/10 / (1 + z^2/10)) = (0, 0.38416 / 1.38416) = (0, 0.277540).
    assert stats.wilson_interval(0, 10, z=1.96) == pytest.approx((0.0, 0.277540), abs=1e-6)
    assert stats.wilson_interval(15, 15)[1] == 1.0
    with pytest.raises(ValueError):
        stats.wilson_interval(16, 15)


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_rate_and_stays_in_unit_interval(case: tuple[int, int]) -> None:
    k, n = case
    lo, hi = stats.wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    # Four times the trials at the same rate: a narrower interval.
    lo4, hi4 = stats.wilson_interval(4 * k, 4 * n)
    assert hi4 - lo4 < hi - lo


def test_wilson_equals_the_closed_form_for_every_table_up_to_30_trials() -> None:
    z = stats.Z_95
    for n in range(1, 31):
        for k in range(n + 1):
            p = k / n
            denom = 1 + z * z / n
            centre = (p + z * z / (2 * n)) / denom
            half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
            expected = (0.0 if k == 0 else centre - half, 1.0 if k == n else centre + half)
            assert stats.wilson_interval(k, n) == pytest.approx(expected, abs=1e-12)


def test_bootstrap_is_seeded_and_agrees_with_scipy() -> None:
    import scipy.stats

    progress = [1, 1, 0.5, 0, 1, 0.5, 0.5, 1, 0, 1, 1, 0.5, 0, 1, 1]
    ci = stats.bootstrap_mean_ci(progress, seed=3, resamples=20_000)
    assert ci == stats.bootstrap_mean_ci(progress, seed=3, resamples=20_000)
    assert ci[0] < np.mean(progress) < ci[1]
    reference = scipy.stats.bootstrap((np.array(progress),), np.mean, method="percentile",
                                      n_resamples=20_000, rng=np.random.default_rng(3)).confidence_interval
    assert ci == (reference.low, reference.high)
    other_seed = stats.bootstrap_mean_ci(progress, seed=7, resamples=20_000)
    assert other_seed == pytest.approx(ci, abs=0.02)
    assert stats.bootstrap_mean_ci([0.5] * 5, seed=0) == (0.5, 0.5)


def _fisher_by_hand(k1: int, n1: int, k2: int, n2: int) -> float:
    # Hypergeometric probabilities of every table with the same margins; two-sided p sums
    # those no more likely than the observed one.
    k, n = k1 + k2, n1 + n2
    prob = {x: math.comb(n1, x) * math.comb(n2, k - x) / math.comb(n, k)
            for x in range(max(0, k - n2), min(k, n1) + 1)}
    return sum(p for p in prob.values() if p <= prob[k1] * (1 + 1e-9))


@pytest.mark.parametrize("case", [(12, 15, 5, 15), (2, 15, 0, 15), (10, 15, 10, 15), (4, 15, 1, 15)])
def test_fisher_by_hand(case: tuple[int, int, int, int]) -> None:
    assert stats.fisher_pvalue(*case) == pytest.approx(_fisher_by_hand(*case), rel=1e-9)


def test_permutation_test_is_exact_on_small_samples() -> None:
    a, b = [1, 1, 1, 0.5], [0, 0, 0.5, 0]
    pooled = a + b
    observed = abs(np.mean(a) - np.mean(b))
    splits = list(itertools.combinations(range(8), 4))  # 70 splits: fewer than the resamples, so exact
    extreme = sum(
        abs(np.mean([pooled[i] for i in s]) - np.mean([pooled[i] for i in range(8) if i not in s])) >= observed - 1e-12
        for s in splits)
    assert stats.permutation_pvalue(a, b, seed=0) == pytest.approx(extreme / len(splits))
    assert stats.permutation_pvalue(a, a, seed=0) == 1.0


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31))
def test_permutation_p_value_is_seeded_and_valid(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 3, 15) / 2, rng.integers(0, 3, 15) / 2
    p = stats.permutation_pvalue(a, b, seed=seed, resamples=500)
    assert 0 < p <= 1
    assert p == stats.permutation_pvalue(a, b, seed=seed, resamples=500)
