"""Early stopping: fires on a synthetic plateau exactly `patience` evals after the last real
improvement, and not before; improvements above the threshold keep the run going."""

import pytest

from chinchax.errors import UserError
from chinchax.sweeps.train.stop import EarlyStop, is_best


def first_stop(rule: EarlyStop, losses) -> int | None:
  """The number of evals after which the rule first stops (None: never)."""
  return next((n for n in range(1, len(losses) + 1) if rule.should_stop(losses[:n])), None)


def test_fires_patience_evals_after_the_plateau_starts():
  losses = [5.0, 4.0, 3.0, 2.5] + [2.5, 2.499, 2.5, 2.49, 2.5]  # plateau from eval 4 on
  # The plateau's dips (0.04%, 0.4%) are below r = 1%: the last improvement is eval 4.
  assert first_stop(EarlyStop(patience=3, min_rel_improvement=0.01), losses) == 4 + 3
  assert first_stop(EarlyStop(patience=5, min_rel_improvement=0.01), losses) == 4 + 5
  # With r = 0 the dip to 2.49 at eval 8 is an improvement: no stop within these evals.
  assert first_stop(EarlyStop(patience=3, min_rel_improvement=0.0), losses) is None


def test_steady_improvement_above_threshold_never_stops():
  losses = [4.0 * 0.97**k for k in range(50)]  # 3% per eval
  assert first_stop(EarlyStop(patience=2, min_rel_improvement=0.02), losses) is None
  # Over a window of 2 evals the best improves by 1 - 0.97**2 = 5.9%: below 7%, so it stops.
  assert first_stop(EarlyStop(patience=2, min_rel_improvement=0.07), losses) == 3


def test_off_by_default_and_bad_settings_refused():
  assert not EarlyStop().enabled
  assert first_stop(EarlyStop(), [1.0] * 20) is None
  with pytest.raises(UserError, match="patience"):
    EarlyStop(patience=-1)
  with pytest.raises(UserError, match="min_rel_improvement"):
    EarlyStop(patience=1, min_rel_improvement=1.5)


def test_is_best_tracks_the_running_minimum():
  losses = [3.0, 2.0, 2.5, 1.9, 1.95]
  assert [is_best(losses[:n]) for n in range(1, 6)] == [True, True, False, True, False]
