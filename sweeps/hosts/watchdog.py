"""A train step that never finishes ends its process: the step-progress watchdog.

A collective that one device or one process never joins (a frozen host, a lost coordinator, a
deadlock in the runtime) blocks the main thread inside XLA, where neither a signal handler
nor the stop agreement (watch.py) can reach it. A thread per process watches the train loop's
progress instead: when no step has finished for the deadline, it prints one line naming the
process and the step, tells the other processes (they end too: watch.py, or their own
watchdog) and exits with chinchax/exit_codes.py's STUCK (77), which the launchers restart; a
rerun resumes from the last checkpoint. A SIGTERM that a stuck main thread cannot act on
ends the same way, within the deadline.

The deadline is max(CHINCHAX_WATCHDOG_S (FLOOR_S unless set), FACTOR x the slowest interval
between two progress marks so far), that interval starting as the train step's compile time:
room for the eval step's first compile, an eval and a checkpoint save, which the marks
(a finished step, a logged one, a finished eval) enclose.
"""

import os
import sys
import threading
import time

from chinchax import exit_codes
from chinchax.sweeps.hosts import native

FLOOR_S = 300.0
FACTOR = 10.0
POLL_S = 0.5


def floor_s() -> float:
  return float(os.environ.get("CHINCHAX_WATCHDOG_S") or FLOOR_S)


class Watchdog:
  """`progress(step)` from the main thread each time `step` is known finished; `close()` at
  the end of the loop."""

  def __init__(self, step: int, compile_s: float, process: int, processes: int,
               tell=None, floor: float | None = None):
    self.floor = floor_s() if floor is None else floor
    self.step, self.slowest = step, compile_s
    self.where = f"process {process} of {processes}" if processes > 1 else "this process"
    self._tell = tell  # tell(status): the other processes learn how this one ends
    self._last = time.monotonic()
    self._closed = threading.Event()
    self._thread = threading.Thread(target=self._run, name="chinchax-watchdog", daemon=True)
    self._thread.start()

  def deadline(self) -> float:
    return max(self.floor, FACTOR * self.slowest)

  def progress(self, step: int) -> None:
    now = time.monotonic()
    # A step that outlasted the deadline was not a slow step but a process that could not
    # watch it (stopped, a paused VM): counted, it would push the deadline out by 10x its
    # length, and a thawed process would wait that long on a peer that is gone.
    if now - self._last <= self.deadline():
      self.slowest = max(self.slowest, now - self._last)
    self.step, self._last = max(self.step, step), now

  def close(self) -> None:
    self._closed.set()

  def _run(self) -> None:
    while not self._closed.wait(POLL_S):
      waited, deadline = time.monotonic() - self._last, self.deadline()
      if waited > deadline and not self._closed.is_set():
        self._fire(waited, deadline)

  def _fire(self, waited: float, deadline: float) -> None:
    status = exit_codes.STUCK
    native.exit_if_claimed(status)  # another path may be ending this process already
    print(f"chinchax: error: {self.where}: train step {self.step + 1} has not finished "
          f"{waited:.0f} s after step {self.step} (the watchdog's deadline is {deadline:.0f} s: "
          f"CHINCHAX_WATCHDOG_S, at least {FACTOR:g} x the slowest step so far); a collective "
          f"is stuck or a host frozen. This process stops (exit status {status}); rerun the "
          f"job (every process) to resume from the last checkpoint{native.kept()}",
          file=sys.stderr, flush=True)
    if self._tell is not None:
      # The coordinator may be the frozen one: its store is given a second, not forever.
      t = threading.Thread(target=self._tell, args=(status,), daemon=True)
      t.start()
      t.join(1.0)
    os._exit(status)  # the main thread is inside a call that does not return
