"""Where a run's wall time goes: seconds per phase (`Clock`, for the run record's `time_s`
field), training throughput between log steps (`Throughput`) and the console's h:mm:ss.

    clock = timing.Clock()
    with clock("data"):
      batch = batch_at(step)
    ...
    record["time_s"] = clock.seconds(wall)

Phases (sweeps/train/loop.py): `init` (the sharded initial state or a restore, its compile
included), `compile` (the train step, ahead of the loop), `data` (host time building batches),
`eval`, `checkpoint` (saves), and `step`: the rest of the training loop's time, i.e. the steps
themselves, which run asynchronously and are waited for at each logged step. `other` is the
rest of the wall time (opening the data, setup, writing the record).
"""

import collections
import contextlib
import time

PHASES = ("init", "compile", "data", "step", "eval", "checkpoint")


class Clock:

  def __init__(self):
    self._s: dict[str, float] = collections.defaultdict(float)

  @contextlib.contextmanager
  def __call__(self, phase: str):
    t = time.perf_counter()
    try:
      yield
    finally:
      self._s[phase] += time.perf_counter() - t

  def mark(self) -> tuple[float, float]:
    return time.perf_counter(), sum(self._s.values())

  def rest(self, phase: str, mark: tuple[float, float]) -> None:
    """Adds to `phase` the time since `mark` not counted in another phase meanwhile."""
    t, counted = mark
    self._s[phase] += (time.perf_counter() - t) - (sum(self._s.values()) - counted)

  def seconds(self, wall: float) -> dict[str, float]:
    out = {k: round(self._s.get(k, 0.0), 3) for k in PHASES}
    out["other"] = round(max(0.0, wall - sum(out.values())), 3)
    return out


class Throughput:
  """Training throughput: time between log steps, less the evals in between."""

  def __init__(self, step: int, tokens_per_step: int):
    self.t, self.step, self.tokens_per_step, self.train_s = time.time(), step, tokens_per_step, 0.0

  def lap(self, step: int) -> float:
    """Tokens per second since the last lap."""
    now = time.time()
    tok_s = (step - self.step) * self.tokens_per_step / max(now - self.t, 1e-9)
    self.train_s += now - self.t
    self.t, self.step = now, step
    return tok_s

  def pause(self, seconds: float) -> None:
    self.t += seconds


def clock_text(seconds: float) -> str:
  s = int(seconds)
  return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
