"""Agreement statistics (utils/results/agreement_pairs.py, their intervals in report_bootstrap.py) against textbook values, scikit-learn and SciPy."""

from __future__ import annotations

import math
import random

import pytest

from lmms_video_reasoning.utils.results.agreement_pairs import agreement_rate, cohen_kappa, kendall_tau, weighted_kappa
from lmms_video_reasoning.utils.results.report_bootstrap import bootstrap_interval, percentile_interval


def table_pairs(counts: dict[tuple, int]) -> list[tuple]:
    return [pair for pair, count in counts.items() for _ in range(count)]


def test_cohen_kappa_textbook_example():
    # 50 items: both yes 20, A yes / B no 5, A no / B yes 10, both no 15 -> p_o 0.7, p_e 0.5, kappa 0.4
    pairs = table_pairs({("yes", "yes"): 20, ("yes", "no"): 5, ("no", "yes"): 10, ("no", "no"): 15})
    assert agreement_rate(pairs) == pytest.approx(0.7)
    assert cohen_kappa(pairs) == pytest.approx(0.4)


def test_cohen_kappa_limits():
    assert cohen_kappa([(1, 1), (0, 0), (1, 1)]) == pytest.approx(1.0)
    assert cohen_kappa([(1, 0), (0, 1)]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa([("a", "a")] * 5)), "one label throughout: undefined, not 1"
    assert math.isnan(cohen_kappa([])) and math.isnan(agreement_rate([]))


def test_cohen_kappa_equals_scikit_learn_on_random_labels():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(3)
    for _ in range(20):
        labels = ["Matched", "Wrong", "Redundant"][: rng.randint(2, 3)]
        pairs = [(rng.choice(labels), rng.choice(labels)) for _ in range(rng.randint(5, 60))]
        if len({a for a, _ in pairs} | {b for _, b in pairs}) < 2:
            continue
        a, b = zip(*pairs)
        assert cohen_kappa(pairs) == pytest.approx(metrics.cohen_kappa_score(a, b), abs=1e-12)


def test_weighted_kappa_hand_computed():
    # (1,2) and (2,1): observed squared distance 1, expected 0.5 -> 1 - 1/0.5 = -1
    assert weighted_kappa([(1, 2), (2, 1)]) == pytest.approx(-1.0)
    # a near miss costs less than a far one
    near = [(0, 0), (5, 5), (10, 10), (5, 6)]
    far = [(0, 0), (5, 5), (10, 10), (5, 10)]
    assert weighted_kappa(near) > weighted_kappa(far)
    assert math.isnan(weighted_kappa([(7, 7), (7, 7)]))


def test_weighted_kappa_equals_scikit_learn_on_a_0_to_10_scale():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(5)
    for _ in range(20):
        pairs = []
        for _ in range(rng.randint(10, 80)):
            truth = rng.randint(0, 10)
            pairs.append((truth, min(10, max(0, truth + rng.choice([-2, -1, 0, 0, 1, 3])))))
        a, b = zip(*pairs)
        expected = metrics.cohen_kappa_score(a, b, labels=list(range(11)), weights="quadratic")
        assert weighted_kappa(pairs) == pytest.approx(expected, abs=1e-12)


def test_kendall_tau_textbook_and_scipy():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # 5 items, 8 concordant and 2 discordant pairs: (8 - 2) / 10
    assert kendall_tau([1, 2, 3, 4, 5], [3, 4, 1, 2, 5]) == pytest.approx(0.2)
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3])) and math.isnan(kendall_tau([1], [2]))
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    for _ in range(30):
        n = rng.randint(3, 12)
        x = [rng.randint(0, 5) for _ in range(n)]  # ties on purpose: tau-b
        y = [rng.randint(0, 5) for _ in range(n)]
        expected = stats.kendalltau(x, y).statistic
        got = kendall_tau(x, y)
        assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)


def test_bootstrap_interval_recovers_a_known_disagreement_rate():
    """400 questions, each verdict flipped with probability 0.2: the 95% interval of the
    disagreement rate holds 0.2 and the rate measured on the sample."""
    rng = random.Random(7)
    units = []
    for _ in range(400):
        truth = rng.choice(["0", "1"])
        flipped = {"0": "1", "1": "0"}[truth] if rng.random() < 0.2 else truth
        units.append([(truth, flipped)])
    disagreement = lambda pairs: 1 - agreement_rate(pairs)  # noqa: E731
    measured = disagreement([p for unit in units for p in unit])
    low, high = bootstrap_interval(units, disagreement, n=1000, seed=0)
    assert low <= 0.2 <= high and low <= measured <= high and high - low < 0.1
    assert bootstrap_interval(units, disagreement, n=1000, seed=0) == (low, high), "seeded"
    assert bootstrap_interval(units[:1], disagreement) is None, "one unit: no interval"
    assert bootstrap_interval(units, disagreement, n=0) is None


def test_percentile_interval_needs_mostly_defined_values():
    assert percentile_interval([math.nan] * 8 + [1.0, 2.0]) is None
    low, high = percentile_interval([float(v) for v in range(101)])
    assert low == pytest.approx(2.5) and high == pytest.approx(97.5)
