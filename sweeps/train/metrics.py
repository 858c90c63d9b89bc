"""Per-step metrics of a run: `metrics.jsonl` (the record the fits read), TensorBoard events,
and where its wall time goes.

Only process 0 writes. The file is append-only; on resume it is cut back to the restored step,
and only that far: lines past it were written after the last checkpoint by a run that then
died, and the resumed run writes them again (the trajectory is exact, so the values are the
same). A torn line (a crash mid-append) is dropped, the lines around it kept. A row at the
restored step that the file already holds is not written twice: a run killed between its last
checkpoint and the end evaluates again on resume, and its final eval row is already there.

A local file is appended to line by line. An object store (a `gs://` workdir) has no append:
the rows are kept in memory and the whole object is rewritten by `flush()`, at most every
FLUSH_EVERY_S from `write()`, and by `close()`. train() flushes whenever a checkpoint is saved,
so the file never lags a checkpoint: rows before a restored step are never written again.
TensorBoard events on an object store are buffered and rewritten the same way (`_ObjectFile`).

The wall time: seconds per phase (`Clock`, for the run record's `time_s`
field), training throughput between log steps (`Throughput`) and the console's h:mm:ss.

    clock = metrics.Clock()
    with clock("data"):
      batch = batch_at(step)
    ...
    record["time_s"] = clock.seconds(wall)

Phases (sweeps/train/loop.py): `init` (the sharded initial state or a restore, its compile
included), `compile` (the train step, ahead of the loop), `data` (host time building batches),
`eval`, `checkpoint` (saves), and `step`: the rest of the training loop's time, i.e. the steps
themselves, which run asynchronously and are waited for at each logged step. `other` is the
rest of the wall time (opening the data, setup, writing the record)."""

import collections
import contextlib
import io
import json
import math
import os
import time

import jax

from chinchax import atomic, killpoints
from chinchax.scaling.runs import records


FLUSH_EVERY_S = 30.0


def _clean(v):
  if hasattr(v, "item"):
    v = v.item()
  if isinstance(v, float) and not math.isfinite(v):
    return None
  return v


class MetricsWriter:
  """One JSON line per logged step; mirrors scalars to TensorBoard."""

  def __init__(self, workdir: str, resume_step: int = 0, tensorboard: bool = True):
    self.path = os.path.join(workdir, "metrics.jsonl")
    self.enabled = jax.process_index() == 0
    self._remote = atomic.is_remote(self.path)
    self._lines, self._unflushed, self._flushed_at = [], False, time.monotonic()
    self._tb = None
    self._resume_step, self._at_resume = resume_step, set()
    if not self.enabled:
      return
    text = records.metrics_text(self.path)
    rows = [r for r in records.parse_metrics(text or "") if r["step"] <= resume_step]
    self._at_resume = {frozenset(r) for r in rows if r["step"] == resume_step}
    kept = "".join(json.dumps(r) + "\n" for r in rows)
    if kept != text:  # new, or rows past the restored step or a torn line: cut back, atomically
      atomic.write_text(self.path, kept)
    self._lines = [kept] if self._remote else []  # remote: the whole file, for each flush
    if tensorboard:
      from tensorboardX import SummaryWriter  # no TensorFlow needed
      logdir = os.path.join(workdir, "tensorboard")
      if self._remote:
        _register_object_files(logdir)
      self._tb = SummaryWriter(logdir, purge_step=resume_step + 1)

  def write(self, step: int, **scalars) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), **{k: _clean(v) for k, v in scalars.items()}}
    if "eval_loss" in row:
      killpoints.hit("eval")
    if row["step"] == self._resume_step and frozenset(row) in self._at_resume:
      self._at_resume.discard(frozenset(row))
      return  # the file holds this row already (same step, same values: see the docstring)
    line = json.dumps(row) + "\n"
    if self._remote:
      self._lines.append(line)
      self._unflushed = True
      if time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
        self.flush()
    else:
      with open(self.path, "a") as f:
        killpoints.hit("append:metrics.jsonl",
                       before=lambda: (f.write(line[:len(line) // 2]), f.flush()))
        f.write(line)
    if self._tb is not None:
      for k, v in row.items():
        if k != "step" and isinstance(v, (int, float)):
          self._tb.add_scalar(k, v, step)

  def flush(self) -> None:
    """Every row written so far is in the file (locally each write already appended it)."""
    if self._remote and self._unflushed:
      atomic.write_text(self.path, "".join(self._lines))
    self._unflushed, self._flushed_at = False, time.monotonic()

  def close(self) -> None:
    self.flush()
    if self._tb is not None:
      self._tb.close()


class _ObjectFile:
  """A TensorBoard event file on an object store: buffered, rewritten whole on each flush.

  tensorboardX's own gs:// writer needs google-cloud-storage; this one goes through
  `scaling.atomic` (etils.epath, gcsfs) like every other file of the workdir.
  """

  def __init__(self, path: str):
    self.path, self._buf, self._written = path, io.BytesIO(), -1

  def write(self, data: bytes) -> None:
    self._buf.write(data)

  def flush(self) -> None:
    if self._buf.tell() != self._written:  # tensorboardX flushes every 2 minutes regardless
      atomic.write_bytes(self.path, self._buf.getvalue())
      self._written = self._buf.tell()

  def close(self) -> None:
    self.flush()


class _ObjectFiles:
  """tensorboardX's writer factory for one URL scheme."""

  def open(self, path: str) -> _ObjectFile:
    return _ObjectFile(path)

  def directory_check(self, path: str) -> None:
    del path  # an object store has no folders to make


def _register_object_files(logdir: str) -> None:
  from tensorboardX import record_writer  # pylint: disable=g-import-not-at-top
  record_writer.register_writer_factory(logdir.split("://", 1)[0], _ObjectFiles())


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
