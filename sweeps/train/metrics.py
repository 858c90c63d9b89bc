"""Per-step metrics of a run: `metrics.jsonl` (the record the fits read) and TensorBoard events.

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
"""

import io
import json
import math
import os
import time

import jax

from chinchax import atomic, killpoints
from chinchax.scaling import records

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
