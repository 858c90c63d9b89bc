"""What `chinchax sweep` and `chinchax train` do to the console before they run.

* `quiet_libraries`: the libraries' repeated warnings (absl, orbax, TFDS: a dozen identical
  lines per run) collapsed to their first occurrence, TFDS's bars and banners replaced by one
  line when the corpus is built (sweeps/data/text_builder.py) and Python's
  DeprecationWarnings hidden; `--verbose` keeps everything.
* `guard_stdout`: stdout whose reader left (`chinchax sweep | head`, or `| tee` killed by
  Ctrl-C) is neither a traceback nor a failed cell: the writes go to /dev/null and the run
  stops as for a signal (reason SIGPIPE: checkpointed, rerun to resume).
"""

import contextlib
import io
import logging
import os
import sys
import warnings



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
