"""When a run stops before its last step: on a signal (`StopFlag`) or when its held-out loss
stops improving (`EarlyStop`).

The stop flag is set by SIGTERM (a preemption) or SIGINT (Ctrl-C), read by the train loop,
which saves a checkpoint and returns where it stands. On several processes the step they all
stop at is agreed by sweeps/hosts/watch.py; a closed stdout sets it too (`request_stop`).

Early stopping is for `chinchax train` runs (not sweep cells, whose D is the experiment). With
eval losses l_1, ..., l_n (in eval order) and `patience` = p, the run stops after eval n
when the last p evals did not improve on the best before them by the relative amount r
(`min_rel_improvement`):

    min(l_{n-p+1}, ..., l_n) > (1 - r) · min(l_1, ..., l_{n-p})

It is a function of the eval history alone, which `metrics.jsonl` holds up to the restored
step, so a resumed run decides exactly as one never stopped. patience = 0 turns it off."""

import dataclasses
import signal
import threading
from typing import Sequence

from chinchax.errors import UserError


class StopFlag:
  """Set by SIGTERM (preemption) or SIGINT; the train loop saves and exits when it is set."""

  def __init__(self):
    self.event = threading.Event()
    self.reason = None
    self._previous = {}

  def install(self) -> "StopFlag":
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGTERM, signal.SIGINT):
        self._previous[sig] = signal.signal(sig, self._handle)
    _INSTALLED.append(self)
    return self

  def uninstall(self) -> None:
    """Puts back the handlers `install` replaced (a finished run must not swallow Ctrl-C)."""
    for sig, handler in self._previous.items():
      signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    self._previous = {}
    if self in _INSTALLED:
      _INSTALLED.remove(self)

  def set(self, reason: str) -> None:
    if not self.event.is_set():
      self.reason = reason
    self.event.set()

  def _handle(self, signum, _frame):
    self.reason = signal.Signals(signum).name
    self.event.set()

  def __bool__(self) -> bool:
    return self.event.is_set()


_INSTALLED: list[StopFlag] = []


def request_stop(reason: str) -> bool:
  """Sets every installed StopFlag as a signal would (e.g. "SIGPIPE": stdout's reader left);
  False when none is installed."""
  for flag in list(_INSTALLED):
    flag.set(reason)
  return bool(_INSTALLED)


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
