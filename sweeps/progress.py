"""The sweep's progress: one line per cell, with cells done/total, tokens/s and an ETA for the
whole sweep.

On a terminal the running cell is a tqdm bar updated in place (its steps, loss, tokens/s and the
sweep's ETA), replaced by the cell's line when it ends; piped, only the cells' lines are
printed. The ETA starts from the dry run's estimate of each cell (sweeps/estimate.py) and is
rescaled by how long the work done so far actually took against that estimate, so a machine
twice as slow as the estimate's sees twice the ETA after its first cell.
"""

import sys
import threading
import time
from collections.abc import Callable, Sequence

import tqdm

from chinchax.sweeps.train.metrics import clock_text


class SweepProgress:
  """The sweep driver's view of its jobs; `step` is called from the train loop."""

  def __init__(self, names: Sequence[str], estimate_s: Sequence[float], *, stream=None,
               live: bool | None = None, clock: Callable[[], float] = time.monotonic,
               done_before: int = 0):
    self.names = list(names)
    self.done_before = done_before  # jobs a resumed sweep found done: the count goes on
    self.est = dict(zip(names, estimate_s))
    self.stream = stream or sys.stdout
    self.live = _isatty(self.stream) if live is None else live
    self.clock = clock
    self.t0 = clock()
    self.done: dict[str, float] = {}  # name -> the estimate of a job that ended
    self.current: dict[str, float] = {}  # name -> the fraction of its steps done
    self.tok_s: dict[str, float] = {}
    self.bar = None
    self.lock = threading.Lock()

  def eta_s(self) -> float:
    """Seconds left in the sweep: the estimates of the work left, times actual / estimated of
    the work done (1 until some is done)."""
    done_est = sum(self.done.values()) + sum(self.est[n] * f for n, f in self.current.items())
    left_est = sum(e for n, e in self.est.items() if n not in self.done) - sum(
        self.est[n] * f for n, f in self.current.items())
    elapsed = self.clock() - self.t0
    scale = elapsed / done_est if done_est > 0 and elapsed > 0 else 1.0
    return max(left_est, 0.0) * scale

  def start(self, name: str) -> Callable[[int, int, float, float], None]:
    """The cell `name` starts; returns its `progress(step, total, tokens_per_s, loss)`."""
    with self.lock:
      self.current[name] = 0.0
      if self.live and self.bar is None:
        self.bar = tqdm.tqdm(total=1, desc=self._tag(name), file=self.stream, leave=False,
                             dynamic_ncols=True, unit="step",
                             bar_format="{desc} {percentage:3.0f}%|{bar:20}| {n}/{total} "
                                        "steps{postfix}")

    def progress(step: int, total: int, tokens_per_s: float, loss: float) -> None:
      with self.lock:
        self.current[name] = step / max(total, 1)
        self.tok_s[name] = tokens_per_s
        if self.bar is not None and self.bar.desc.endswith(name):
          self.bar.total = total
          self.bar.n = step
          self.bar.set_postfix_str(f"loss {loss:.4f} | {_rate(tokens_per_s)} | sweep ETA "
                                   f"{clock_text(self.eta_s())}", refresh=False)
          self.bar.refresh()

    return progress

  def end(self, name: str, status: str, detail: str) -> str:
    """The cell ended: its one line (also printed), e.g.
    `[3/10] C1e11-N1.13e4: done, eval loss 2.1840 | 31.2k tok/s | sweep ETA 2:10`."""
    with self.lock:
      self.current.pop(name, None)
      self.done[name] = self.est.get(name, 0.0)
      if self.bar is not None and self.bar.desc.endswith(name):
        self.bar.close()
        self.bar = None
      rate = f" | {_rate(self.tok_s[name])}" if name in self.tok_s else ""
      left = len(self.names) - len(self.done)
      eta = f" | sweep ETA {clock_text(self.eta_s())}" if left else ""
      sep = ", " if status == "done" else ": "
      line = (f"[{self.done_before + len(self.done)}/{self.done_before + len(self.names)}] "
              f"{name}: {status}"
              f"{sep + detail if detail else ''}{rate} | "
              f"{clock_text(self.clock() - self.t0)} elapsed{eta}")
      print(line, file=self.stream, flush=True)
      return line

  def _tag(self, name: str) -> str:
    return (f"[{self.done_before + len(self.done) + 1}/{self.done_before + len(self.names)}] "
            f"{name}")


def _rate(tokens_per_s: float) -> str:
  return f"{tokens_per_s / 1e3:.1f}k tok/s"


def _isatty(stream) -> bool:
  try:
    return stream.isatty()
  except (AttributeError, ValueError):
    return False
