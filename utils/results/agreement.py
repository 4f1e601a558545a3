"""Agreement statistics for two judges rating the same items (`lmms-vr judge-agreement`).

Small pure functions, each checked against textbook values and scikit-learn / SciPy in
tests/test_agreement_stats.py:

- `agreement_rate`: the share of pairs with the same label;
- `cohen_kappa`: Cohen's kappa, agreement beyond the chance agreement of the two marginals;
- `weighted_kappa`: for ratings on an ordered scale, disagreements weighted by their distance
  (quadratic by default: the weight of rating 3 against 7 is (3-7)^2, so a near miss costs little);
- `kendall_tau`: Kendall's tau-b of two rankings (ties handled), for the runs' order under two judges;
- `bootstrap_interval`: a percentile interval of any of them, resampling units (questions, or
  videos) with replacement, so the pairs of one question move together.

Undefined values are NaN, never 0: kappa when both judges use one and the same label (no
disagreement is possible by chance or otherwise), tau when either ranking is all ties.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable, Hashable, Sequence, TypeVar

T = TypeVar("T")
Pair = tuple[Hashable, Hashable]  # (reference label, candidate label)


def agreement_rate(pairs: Sequence[Pair]) -> float:
    """The share of pairs whose two labels are equal (NaN for no pairs)."""
    if not pairs:
        return math.nan
    return sum(a == b for a, b in pairs) / len(pairs)


def cohen_kappa(pairs: Sequence[Pair]) -> float:
    """Cohen's kappa: (p_o - p_e) / (1 - p_e), p_e from the two judges' own label frequencies.

    NaN when there are no pairs or chance agreement is already 1 (both judges always give the
    same single label)."""
    n = len(pairs)
    if not n:
        return math.nan
    observed = agreement_rate(pairs)
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[label] * second.get(label, 0) for label in first) / (n * n)
    if expected >= 1.0 - 1e-12:
        return math.nan
    return (observed - expected) / (1.0 - expected)


def weighted_kappa(pairs: Sequence[tuple[float, float]], weights: str = "quadratic") -> float:
    """Weighted kappa of ratings: 1 - sum(w * observed) / sum(w * expected), w = |a - b| (linear)
    or (a - b)^2 (quadratic) of the rating values themselves (so the weights follow the
    scale, e.g. 0-10, whichever ratings occur). NaN when there are no pairs or the expected
    disagreement is 0."""
    if weights not in ("linear", "quadratic"):
        raise ValueError(f"weights must be 'linear' or 'quadratic', got {weights!r}")
    n = len(pairs)
    if not n:
        return math.nan
    power = 1 if weights == "linear" else 2
    distance = lambda a, b: abs(float(a) - float(b)) ** power  # noqa: E731
    observed = sum(distance(a, b) for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(count_a * count_b * distance(a, b) for a, count_a in first.items() for b, count_b in second.items()) / (n * n)
    if expected <= 1e-12:
        return math.nan
    return 1.0 - observed / expected


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two paired sequences: (concordant - discordant) / sqrt((n0 - ties_x)(n0 - ties_y)).

    NaN for fewer than two items or when either sequence is constant."""
    if len(x) != len(y):
        raise ValueError(f"kendall_tau needs sequences of one length, got {len(x)} and {len(y)}")
    n = len(x)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                ties_x += 1
                ties_y += 1
            elif dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    pairs = n * (n - 1) // 2
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    if not denominator:
        return math.nan
    return (concordant - discordant) / denominator


def percentile_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The percentile interval of bootstrap values; None when most of them are undefined (NaN)."""
    import numpy as np

    finite = np.array([v for v in values if isinstance(v, (int, float)) and not math.isnan(v)], dtype=float)
    if len(finite) < max(2, len(values) // 2):
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_interval(units: Sequence[Sequence[T]], statistic: Callable[[list[T]], float], n: int = 1000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float] | None:
    """Percentile interval of ``statistic`` over ``n`` resamples of ``units`` (each a list of
    items, e.g. one question's verdict pairs) drawn with replacement; None with fewer than two
    units (every resample would be the sample itself) or ``n`` = 0."""
    import numpy as np

    if len(units) < 2 or n <= 0:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n):
        picks = rng.integers(0, len(units), len(units))
        values.append(statistic([item for pick in picks for item in units[pick]]))
    return percentile_interval(values, level)


def bootstrap_values(count: int, compute: Callable[[Sequence[int]], Any], n: int = 1000, seed: int = 0) -> list[Any]:
    """``compute(picks)`` on ``n`` resamples of ``range(count)`` with replacement (seeded), for
    statistics that read several paired samples at once (e.g. a ranking of runs)."""
    import numpy as np

    if count < 2 or n <= 0:
        return []
    rng = np.random.default_rng(seed)
    return [compute(rng.integers(0, count, count)) for _ in range(n)]
