"""A task's own aggregation gets a standard error when it declares how."""

import math
import statistics

from lmms_eval.api.metrics import bootstrappable, stderr_for_metric


@bootstrappable
def share_of_ones(items):
    """A custom aggregation: lmms-eval cannot know its standard error, the task says "bootstrap me"."""
    return sum(item == 1 for item in items) / len(items)


def plain_custom(items):
    return sum(items) / len(items)


def f1_of_means(items):
    return 2 * statistics.mean(p for p, _ in items) * statistics.mean(r for _, r in items) / 2


def _analytic(items):
    return 0.123


f1_of_means.stderr_for = lambda bootstrap_iters: _analytic  # a task that computes its own


def test_a_bootstrappable_aggregation_is_bootstrapped():
    items = [1, 0] * 50
    stderr = stderr_for_metric(share_of_ones, bootstrap_iters=1000)(items)
    assert math.isclose(stderr, 0.05, rel_tol=0.25)  # sqrt(0.5 * 0.5 / 100)


def test_an_aggregation_can_bring_its_own_standard_error():
    assert stderr_for_metric(f1_of_means, bootstrap_iters=100)([(1, 1)]) == 0.123
    assert stderr_for_metric(f1_of_means, bootstrap_iters=0) is None  # 0 iterations: no standard error at all


def test_an_undeclared_custom_aggregation_has_none_as_before():
    assert stderr_for_metric(plain_custom, bootstrap_iters=1000) is None
