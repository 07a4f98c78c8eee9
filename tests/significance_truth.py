"""Welch's t-test and the Mann-Whitney U test computed here by hand, from
their textbook definitions: the truths tests hold `tcpvar compare --test`
(analyzers/significance.py, which calls SciPy) to."""
from __future__ import annotations

import math
import statistics
from itertools import combinations


def _t_pdf(x: float, df: float) -> float:
    c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(c - (df + 1) / 2 * math.log1p(x * x / df))


def t_two_sided_p(t: float, df: float, steps: int = 20_000) -> float:
    """P(|T| >= |t|) for Student's t with (not necessarily whole) @df: one
    minus twice the density integrated from 0 to |t| (Simpson's rule)."""
    h = abs(t) / steps
    total = _t_pdf(0, df) + _t_pdf(abs(t), df)
    total += sum((4 if k % 2 else 2) * _t_pdf(k * h, df) for k in range(1, steps))
    return 1 - 2 * total * h / 3


def welch(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """(t, Welch-Satterthwaite degrees of freedom, two-sided p) of a - b."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return t, df, t_two_sided_p(t, df)


def u_statistic(a: list[float], b: list[float]) -> float:
    """Pairs (x of a, y of b) with x > y, and half of those with x == y."""
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def u_exact_p(a: list[float], b: list[float]) -> float:
    """The exact two-sided p of U for values without ties: every way to
    give len(a) of the ranks to a, counted."""
    n = len(a) + len(b)
    u = u_statistic(a, b)
    # U of a placement: the rank sum of a's ranks (1-based) less its least value
    least = len(a) * (len(a) + 1) / 2
    us = [sum(ranks) + len(ranks) - least for ranks in combinations(range(n), len(a))]
    low = sum(1 for x in us if x <= u) / len(us)
    high = sum(1 for x in us if x >= u) / len(us)
    return min(1.0, 2 * min(low, high))
