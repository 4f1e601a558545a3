"""Agreement statistics for two judges rating the same items (`lmms-vr judge-agreement`).

Small pure functions, each checked against textbook values and scikit-learn / SciPy in
tests/test_agreement_stats.py:

- `agreement_rate`: the share of pairs with the same label;
- `cohen_kappa`: Cohen's kappa, agreement beyond the chance agreement of the two marginals;
- `weighted_kappa`: for ratings on an ordered scale, disagreements weighted by their distance
  (quadratic by default: the weight of rating 3 against 7 is (3-7)^2, so a near miss costs little);
- `kendall_tau`: Kendall's tau-b of two rankings (ties handled), for the runs' order under two judges.

Their intervals resample units (questions, or videos) with replacement, so the pairs of one
question move together (`resampling.bootstrap_interval`).

Undefined values are NaN, never 0: kappa when both judges use one and the same label (no
disagreement is possible by chance or otherwise), tau when either ranking is all ties.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Hashable, Sequence

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
