"""`tcpvar compare --test`'s statistics (analyzers/significance.py) held to
printed values and to hand computations (significance_truth.py): Student's
sleep data as R's t.test prints it, an exact Mann-Whitney p counted over
every ranking, Holm's adjustment worked by hand, and the repeats Cohen's
power tables give."""
from __future__ import annotations

import pytest

import significance_truth as truth
from tcpvar.analyzers import significance as sig

# Student (1908), the extra hours of sleep under two drugs (R's `sleep`)
SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 9: 2.262, 30: 2.042}    # printed t tables


@pytest.mark.parametrize("df", sorted(T975))
def test_t_quantile_matches_the_printed_table(df):
    assert round(sig.t975(df), 3) == T975[df]


def test_welch_on_the_sleep_data_as_r_prints_it():
    """R: t.test(extra ~ group, data = sleep) gives t = -1.8608,
    df = 17.776, p-value = 0.07939; Shapiro-Wilk passes both groups, so
    Welch's test is the one chosen."""
    r = sig.two_groups(SLEEP_1, SLEEP_2)
    assert r["test"] == "welch"
    assert r["statistic"] == pytest.approx(-1.8608, abs=1e-4)
    assert r["p"] == pytest.approx(0.07939, abs=1e-5)
    t, df, p = truth.welch(SLEEP_1, SLEEP_2)
    assert df == pytest.approx(17.776, abs=1e-3)
    assert r["p"] == pytest.approx(p, abs=1e-7)


def test_a_skewed_group_is_tested_by_rank():
    """A group with an outlier fails Shapiro-Wilk: Mann-Whitney's U and its
    exact p, as counted over every ranking of the ten values."""
    a, b = [1.0, 1.1, 1.2, 1.3, 9.0], [2.0, 2.1, 2.2, 2.4, 2.6]
    r = sig.two_groups(a, b)
    assert r["test"] == "mann-whitney"
    assert r["statistic"] == truth.u_statistic(a, b) == 5.0
    assert r["p"] == pytest.approx(truth.u_exact_p(a, b), abs=1e-12)


def test_holm_by_hand():
    """p 0.01, 0.04, 0.03 (and one untested pair): sorted, 0.01 x 3 = 0.03,
    0.03 x 2 = 0.06, 0.04 x 1 = 0.04 raised to the 0.06 before it."""
    assert sig.holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06])
    assert sig.holm([0.5, 0.6]) == [1.0, 1.0]           # at most 1


@pytest.mark.parametrize("d, n", [(0.2, 394), (0.5, 64), (0.8, 26), (-0.8, 26)])
def test_repeats_match_cohens_tables(d, n):
    """Two-sided, alpha 0.05, power 0.8: 394, 64 and 26 per group for small,
    medium and large effects (Cohen 1988, Table 2.4.1; G*Power agrees)."""
    assert sig.repeats_needed(d) == n


def test_no_effect_needs_no_repeats():
    assert sig.repeats_needed(0.0) is None and sig.repeats_needed(None) is None
    assert sig.repeats_needed(1e-4) == sig.MAX_REPEATS + 1


def test_cohens_d_on_the_sleep_data():
    """Means 0.75 and 2.33, standard deviations 1.789010 and 2.002249 (R):
    d = 1.58 / sqrt((1.789010^2 + 2.002249^2) / 2)."""
    assert sig.cohens_d(SLEEP_1, SLEEP_2) == pytest.approx(
        1.58 / ((1.789010 ** 2 + 2.002249 ** 2) / 2) ** 0.5, abs=1e-5)


def test_pairs_and_their_marks():
    """Three groups: three pairs, Holm over the three, the intervals'
    overlap read from the groups' own means and half-widths."""
    groups = [{"key": {"cc": c}, "values": {"m": v}, "mean": {"m": mean}, "ci95": {"m": ci}}
              for c, v, mean, ci in (("a", SLEEP_1, 1.0, 0.5), ("b", SLEEP_2, 2.0, 0.6),
                                     ("c", [5.0, 5.0], 5.0, None))]
    out = sig.pairwise(groups, "m")
    ab, ac, bc = out["pairs"]
    assert (ab["a"], ab["b"]) == ({"cc": "a"}, {"cc": "b"})
    assert ab["ci_overlap"] is True and ac["ci_overlap"] is None
    # a and b are the closest pair, its p the largest of three: Holm's
    # multiplies it by 1 and lifts it to the adjusted ones before it
    p1, p2 = sorted((ac["p"], bc["p"]))
    assert ab["p"] > p2
    assert ab["p_holm"] == pytest.approx(max(3 * p1, 2 * p2, ab["p"]))
    assert ac["p_holm"] == pytest.approx(3 * p1 if ac["p"] == p1 else max(3 * p1, 2 * p2))
    assert ab["differ"] is False
    assert ab["difference"] == pytest.approx(1.58)
    assert ab["repeats_needed"] > 10
    # c has no spread, but a does: Welch's test still applies
    assert ac["test"] == "welch"
    assert ac["p"] == pytest.approx(truth.welch(SLEEP_1, [5.0, 5.0])[2], abs=1e-7)
