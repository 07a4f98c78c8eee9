"""Whether groups of runs differ (`tcpvar compare --test`): for one metric,
every pair of groups tested with Welch's t-test, or with the Mann-Whitney U
test where a group's values do not look normal (Shapiro-Wilk), the p-values
corrected over the pairs with Holm's method; per pair the observed effect
(Cohen's d) and the repeats per group that would tell the groups apart at
that effect with a power of 0.8, and whether the two 95 % intervals
overlap. docs/compare.md gives the definitions."""
from __future__ import annotations

import math
import statistics
import warnings
from itertools import combinations

ALPHA = 0.05
POWER = 0.8
MAX_REPEATS = 100_000          # beyond this, "more than" (an effect too small to chase)


def t975(df: int) -> float:
    """Student's t quantile at 0.975 for @df degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def holm(ps: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of @ps (None: not tested, left out of the
    count): the k-th smallest of m p-values times (m - k + 1), never less
    than the adjusted one before it, at most 1."""
    order = sorted((p, i) for i, p in enumerate(ps) if p is not None)
    out: list[float | None] = [None] * len(ps)
    running = 0.0
    for k, (p, i) in enumerate(order):
        running = max(running, min(1.0, (len(order) - k) * p))
        out[i] = running
    return out


def looks_normal(xs: list[float]) -> bool:
    """Shapiro-Wilk at ALPHA; with fewer than three values (or none that
    differ) there is nothing to judge by, and Welch's test is kept."""
    if len(xs) < 3 or len(set(xs)) == 1:
        return True
    from scipy import stats

    return bool(stats.shapiro(xs).pvalue >= ALPHA)


def cohens_d(a: list[float], b: list[float]) -> float | None:
    """The difference of the means (b - a) over the root mean square of the
    two standard deviations; None when neither group varies."""
    sd = math.sqrt((statistics.variance(a) + statistics.variance(b)) / 2)
    return (statistics.fmean(b) - statistics.fmean(a)) / sd if sd > 0 else None


def repeats_needed(d: float | None) -> int | None:
    """The fewest runs per group for which a two-sided two-sample t-test at
    ALPHA finds an effect of @d with probability POWER (the noncentral t);
    None when there is no effect to find. MAX_REPEATS + 1: more than that."""
    if d is None or d == 0 or not math.isfinite(d):
        return None
    from scipy import stats

    def power(n: int) -> float:
        df, nc = 2 * n - 2, abs(d) * math.sqrt(n / 2)
        crit = stats.t.ppf(1 - ALPHA / 2, df)
        return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))

    lo, hi = 2, 2
    while power(hi) < POWER:        # doubling, then bisection: power grows with n
        if hi > MAX_REPEATS:
            return MAX_REPEATS + 1
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if power(mid) >= POWER:
            hi = mid
        else:
            lo = mid + 1
    return hi


def two_groups(a: list[float], b: list[float]) -> dict:
    """One pair's test: its name, statistic and p-value (None, with the
    reason, when the values cannot be tested)."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return {"test": None, "statistic": None, "p": None, "reason": "fewer than 2 values"}
    if not (looks_normal(a) and looks_normal(b)):
        r = stats.mannwhitneyu(a, b, alternative="two-sided")
        return {"test": "mann-whitney", "statistic": float(r.statistic), "p": float(r.pvalue),
                "reason": "a group's values do not look normal (Shapiro-Wilk)"}
    if statistics.variance(a) == 0 and statistics.variance(b) == 0:
        return {"test": None, "statistic": None, "p": None, "reason": "no group varies"}
    with warnings.catch_warnings():     # a group without spread: SciPy warns, the t is right
        warnings.simplefilter("ignore", RuntimeWarning)
        r = stats.ttest_ind(a, b, equal_var=False)
    return {"test": "welch", "statistic": float(r.statistic), "p": float(r.pvalue),
            "reason": None}


def _overlap(a: tuple, b: tuple) -> bool | None:
    """Whether two (mean, half-width) intervals overlap; None without both."""
    if None in (*a, *b):
        return None
    return abs(a[0] - b[0]) <= a[1] + b[1]


def pairwise(groups: list[dict], metric: str) -> dict:
    """Every pair of @groups (analyzers/compare.py's, with their `values`)
    on @metric: the test, p, Holm's p, whether they differ at ALPHA after
    it, the difference of the means, Cohen's d, the repeats needed and
    whether the groups' 95 % intervals overlap."""
    pairs = []
    for ga, gb in combinations(groups, 2):
        a = [float(v) for v in ga["values"].get(metric, []) if v is not None]
        b = [float(v) for v in gb["values"].get(metric, []) if v is not None]
        d = cohens_d(a, b) if len(a) > 1 and len(b) > 1 else None
        pairs.append({"a": ga["key"], "b": gb["key"], "n": [len(a), len(b)], **two_groups(a, b),
                      "difference": statistics.fmean(b) - statistics.fmean(a) if a and b
                      else None,
                      "cohens_d": d, "repeats_needed": repeats_needed(d),
                      "ci_overlap": _overlap((ga["mean"][metric], ga["ci95"][metric]),
                                             (gb["mean"][metric], gb["ci95"][metric]))})
    for pair, p in zip(pairs, holm([x["p"] for x in pairs])):
        pair["p_holm"] = p
        pair["differ"] = None if p is None else p < ALPHA
    return {"metric": metric, "alpha": ALPHA, "power": POWER, "pairs": pairs}
