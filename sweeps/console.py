"""The console of `chinchax sweep` and `chinchax train`: what they do to it before they run,
and the sweep's progress while it runs.

* `quiet_libraries`: the libraries' repeated warnings (absl, orbax, TFDS: a dozen identical
  lines per run) collapsed to their first occurrence, TFDS's bars and banners replaced by one
  line when the corpus is built (sweeps/data/text_builder.py) and Python's
  DeprecationWarnings hidden; `--verbose` keeps everything.
* `guard_stdout`: stdout whose reader left (`chinchax sweep | head`, or `| tee` killed by
  Ctrl-C) is neither a traceback nor a failed cell: the writes go to /dev/null and the run
  stops as for a signal (reason SIGPIPE: checkpointed, rerun to resume).
* `SweepProgress`: one line per cell, with cells done/total, tokens/s and an ETA for the
  whole sweep. On a terminal the running cell is a tqdm bar updated in place (its steps,
  loss, tokens/s and the sweep's ETA), replaced by the cell's line when it ends; piped, only
  the cells' lines are printed. The ETA starts from the dry run's estimate of each cell
  (sweeps/dry_run.py) and is rescaled by how long the work done so far actually took
  against that estimate, so a machine twice as slow as the estimate's sees twice the ETA
  after its first cell."""

from collections.abc import Callable, Sequence
import contextlib
import io
import logging
import os
import sys
import threading
import time
import warnings

import tqdm

from chinchax.scaling.numerics import fmt


# TFDS on every chinchax corpus it builds or opens: not news to the user.
NOISE = ("has no dataset_info.json", "Using custom data configuration")


def not_tfds_noise(record: logging.LogRecord) -> bool:
  """A logging filter that drops TFDS's notices about chinchax's own corpora."""
  # The formatted text: TFDS logs 'Variant folder %s has no %s' with the file as an arg.
  return not any(n in record.getMessage() for n in NOISE)


def quiet_tfds() -> None:
  """TFDS's notices off for good (idempotent): for commands that open data without a run."""
  logging.getLogger("absl").addFilter(not_tfds_noise)


class _Once(logging.Filter):
  """Lets the first record of each (logger, message) through, below ERROR; counts the rest."""

  def __init__(self):
    super().__init__()
    self.seen: set[tuple[str, str]] = set()
    self.hidden = 0

  def filter(self, record: logging.LogRecord) -> bool:
    if record.levelno >= logging.ERROR:
      return True
    if not not_tfds_noise(record):
      self.hidden += 1
      return False
    key = (record.name, str(record.msg))
    if key in self.seen:
      self.hidden += 1
      return False
    self.seen.add(key)
    return True


ONCE = _Once()


# absl.logging (absl itself, orbax, TFDS) logs to the "absl" logger; a logger's filter sees
# what is logged to it, not to its children, hence the list.
LOGGERS = ("absl", "jax", "orbax", "grain", "tensorflow_datasets")


@contextlib.contextmanager
def quiet_libraries(verbose: bool = False):
  """For the length of a command (undone after, for in-process callers such as tests)."""
  if verbose:
    yield
    return
  from chinchax.sweeps.data import text_builder  # pylint: disable=g-import-not-at-top  (TFDS)
  text_builder.QUIET = True  # TFDS's bars too, when a corpus is built
  loggers = [logging.getLogger(n) for n in LOGGERS]
  for logger in loggers:
    logger.addFilter(ONCE)
  try:
    with warnings.catch_warnings():
      warnings.filterwarnings("ignore", category=DeprecationWarning)
      yield
  finally:
    text_builder.QUIET = False
    for logger in loggers:
      logger.removeFilter(ONCE)


class _PipeSafe(io.TextIOBase):
  """A text stream that turns a broken pipe into /dev/null and a stop request."""

  def __init__(self, stream):
    super().__init__()
    self.stream = stream
    self.closed_by_reader = False

  def write(self, text: str) -> int:
    if not self.closed_by_reader:
      try:
        self.stream.write(text)
        return len(text)
      except BrokenPipeError:
        self._reader_left()
    _stop()  # again on every write: a run whose stop flag was installed later sees it
    return len(text)

  def flush(self) -> None:
    if not self.closed_by_reader:
      try:
        self.stream.flush()
      except BrokenPipeError:
        self._reader_left()

  def _reader_left(self) -> None:
    self.closed_by_reader = True
    try:  # the buffered bytes would raise again at exit
      os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
      pass
    _stop()

  def isatty(self) -> bool:
    return self.stream.isatty()

  def fileno(self) -> int:
    return self.stream.fileno()

  @property
  def encoding(self):
    return getattr(self.stream, "encoding", "utf-8")


def _stop() -> None:
  from chinchax.sweeps.train import stop as stop_lib
  stop_lib.request_stop("SIGPIPE")


@contextlib.contextmanager
def guard_stdout():
  """sys.stdout broken-pipe-safe for the length of a command."""
  if isinstance(sys.stdout, _PipeSafe):
    yield sys.stdout
    return
  original = sys.stdout
  sys.stdout = _PipeSafe(original)
  try:
    yield sys.stdout
  finally:
    sys.stdout = original


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
                                   f"{fmt.clock(self.eta_s())}", refresh=False)
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
      eta = f" | sweep ETA {fmt.clock(self.eta_s())}" if left else ""
      sep = ", " if status == "done" else ": "
      line = (f"[{self.done_before + len(self.done)}/{self.done_before + len(self.names)}] "
              f"{name}: {status}"
              f"{sep + detail if detail else ''}{rate} | "
              f"{fmt.clock(self.clock() - self.t0)} elapsed{eta}")
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
