"""The KS test is calibrated (about 5% of same-distribution pairs fall below p = 0.05) and has power
(a real shift is found), on fixed seeds."""

from __future__ import annotations

import random

import pytest

from kvgate.audit.ks import kolmogorov_sf, ks_2samp, ks_statistic


def test_the_statistic_of_known_samples() -> None:
    assert ks_statistic([1, 2, 3], [1, 2, 3]) == 0
    assert ks_statistic([1, 2, 3], [4, 5, 6]) == 1
    assert ks_statistic([1, 2, 3, 4], [3, 4, 5, 6]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="non-empty"):
        ks_statistic([], [1])


def test_the_kolmogorov_tail_at_reference_points() -> None:
    # P(K > x): 1.36 and 1.63 are the classic 5% and 1% critical values
    assert kolmogorov_sf(1.36) == pytest.approx(0.0494, abs=1e-3)
    assert kolmogorov_sf(1.63) == pytest.approx(0.0098, abs=1e-3)
    assert kolmogorov_sf(0.1) == 1.0


def test_same_distribution_pairs_are_rejected_about_five_percent_of_the_time() -> None:
    rng = random.Random(7)
    rejected = sum(
        ks_2samp([rng.gauss(0, 1) for _ in range(30)], [rng.gauss(0, 1) for _ in range(30)])[1] < 0.05
        for _ in range(400)
    )
    assert 0.01 <= rejected / 400 <= 0.09


def test_a_shifted_distribution_is_found() -> None:
    rng = random.Random(8)
    found = sum(
        ks_2samp([rng.gauss(0, 1) for _ in range(30)], [rng.gauss(1.0, 1) for _ in range(30)])[1] < 0.05
        for _ in range(100)
    )
    assert found >= 80
