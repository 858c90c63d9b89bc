"""The one owner of percentile intervals (scaling/numerics/intervals.py), against intervals
worked by hand: numpy's default quantile is linear interpolation between order statistics,
position (S - 1)·q."""

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.scaling.numerics import intervals


def test_the_interval_of_eleven_draws_by_hand():
  # 0, 1, ..., 10 shuffled: at 90%, positions 10·0.05 = 0.5 and 10·0.95 = 9.5.
  draws = np.array([7, 3, 10, 0, 5, 9, 1, 8, 2, 6, 4], float)
  assert intervals.interval(draws, 0.9) == pytest.approx([0.5, 9.5], abs=1e-12)
  # at 50%: positions 2.5 and 7.5
  assert intervals.interval(draws, 0.5) == pytest.approx([2.5, 7.5], abs=1e-12)


def test_bands_along_an_axis():
  draws_SxK = np.stack([np.arange(11.0), 10 * np.arange(11.0)], axis=1)
  lo, hi = intervals.quantiles(draws_SxK, 0.8, axis=0)  # positions 1 and 9
  np.testing.assert_allclose(lo, [1.0, 10.0])
  np.testing.assert_allclose(hi, [9.0, 90.0])


@pytest.mark.parametrize("pair, estimate, expected", [
    ([0.4, 0.5], 0.52, [0.4, 0.52]),  # above: widened up
    ([0.4, 0.5], 0.3, [0.3, 0.5]),    # below: widened down
    ([0.4, 0.5], 0.45, [0.4, 0.5]),   # inside: as it was
    ([0.4, 0.5], None, [0.4, 0.5]),   # no estimate
    ([0.4, 0.5], float("nan"), [0.4, 0.5]),
])
def test_an_interval_holds_its_estimate(pair, estimate, expected):
  assert intervals.holding(pair, estimate) == expected


@pytest.mark.parametrize("level", [0, 1, 90, -0.5, True, "0.9", None, float("nan")])
def test_a_level_outside_zero_one_is_refused_naming_the_flag(level):
  with pytest.raises(UserError, match=r"^--ci must be a level strictly between 0 and 1"):
    intervals.check_level(level, "--ci")


def test_a_level_inside_is_returned_as_a_float():
  assert intervals.check_level(np.float32(0.5), "ci") == 0.5
  assert type(intervals.check_level(1 / 3, "ci")) is float


def test_the_reflected_interval_by_hand():
  """Eleven draws 0..10: the 80% percentile interval is [1, 9] (numpy's linear quantiles at
  0.1 and 0.9); about an estimate of 7 its reflection is [14 - 9, 14 - 1] = [5, 13], and the
  union is [1, 13]. About the draws' own centre 5 the reflection is the interval itself."""
  draws = np.arange(11.0)
  assert intervals.with_reflection(draws, 7.0, 0.8) == pytest.approx([1.0, 13.0])
  assert intervals.with_reflection(draws, 5.0, 0.8) == pytest.approx([1.0, 9.0])
