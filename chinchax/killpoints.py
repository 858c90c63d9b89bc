"""Named points where a test makes the process SIGKILL itself: crash safety shown, not hoped for.

    CHINCHAX_KILL_AT=NAME[:K]   kill at the K-th time (default 1) the process reaches NAME
    CHINCHAX_KILL_SIGNAL=TERM   send SIGTERM (a preemption notice) there instead of SIGKILL

Unset (always, outside tests) `hit` is one dictionary lookup. The points, by name:

    step                 a train step was dispatched (sweeps/train/checkpoint.py, once per step)
    checkpoint           a save was started and is being written (async) or is unfinalised
    checkpoint-commit    a save is written out but not committed (orbax's last act)
    eval                 an eval loss was computed and is not yet recorded (sweeps/train/metrics.py)
    append:metrics.jsonl half of a metrics line appended, the rest not (a torn line)
    write:BASENAME       half of an artifact written to its temporary file (chinchax/atomic.py):
                         write:result.json, write:runs.jsonl, write:law.json, ...
    fit                  the sweep's cells are done and the fit starts (sweeps/sweep.py)

`tests/helpers/kill_harness.py` drives them against `chinchax train` and `chinchax sweep`.
"""

import os
import signal
from collections.abc import Callable

ENV = "CHINCHAX_KILL_AT"
SIGNAL_ENV = "CHINCHAX_KILL_SIGNAL"


def _target() -> tuple[str, int] | None:
  spec = os.environ.get(ENV, "")
  if not spec:
    return None
  name, _, k = spec.rpartition(":") if spec.rsplit(":", 1)[-1].isdigit() else (spec, "", "1")
  return name, int(k)


_TARGET = _target()
_hits: dict[str, int] = {}


def hit(name: str, before: Callable[[], None] | None = None, times: int = 1) -> None:
  """SIGKILLs this process when `name` is the armed point and its K-th hit is among these
  `times` (a dispatch of several train steps reaches "step" once for each).

  `before` runs first (e.g. writes half of a line), so the kill leaves what a crash at that
  instant would leave.
  """
  if _TARGET is None or _TARGET[0] != name:
    return
  seen = _hits.get(name, 0)
  _hits[name] = seen + times
  if seen < _TARGET[1] <= seen + times:
    if before is not None:
      before()
    os.kill(os.getpid(), signal.Signals["SIG" + os.environ.get(SIGNAL_ENV, "KILL")])
