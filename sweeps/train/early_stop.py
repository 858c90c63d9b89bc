"""Early stopping on the held-out loss, for `chinchax train` runs (not sweep cells, whose D is
the experiment).

With eval losses l_1, ..., l_n (in eval order) and `patience` = p, the run stops after eval n
when the last p evals did not improve on the best before them by the relative amount r
(`min_rel_improvement`):

    min(l_{n-p+1}, ..., l_n) > (1 - r) · min(l_1, ..., l_{n-p})

It is a function of the eval history alone, which `metrics.jsonl` holds up to the restored
step, so a resumed run decides exactly as one never stopped. patience = 0 turns it off.
"""

import dataclasses
from typing import Sequence

from chinchax.errors import UserError


@dataclasses.dataclass(frozen=True)
class EarlyStop:
  patience: int = 0                # evals without improvement before stopping; 0: off
  min_rel_improvement: float = 0.0  # r: an eval improves when it is below (1 - r) · best

  def __post_init__(self):
    if self.patience < 0:
      raise UserError(f"early_stop.patience={self.patience} must be >= 0 (0 turns it off)")
    if not 0 <= self.min_rel_improvement < 1:
      raise UserError(f"early_stop.min_rel_improvement={self.min_rel_improvement} must be in "
                      "[0, 1)")

  @property
  def enabled(self) -> bool:
    return self.patience > 0

  def should_stop(self, losses: Sequence[float]) -> bool:
    p = self.patience
    if not self.enabled or len(losses) <= p:
      return False
    best_before = min(losses[:-p])
    return min(losses[-p:]) > (1.0 - self.min_rel_improvement) * best_before


def is_best(losses: Sequence[float]) -> bool:
  """Whether the last eval is the best so far (the one the best checkpoint keeps)."""
  return bool(losses) and losses[-1] <= min(losses)
