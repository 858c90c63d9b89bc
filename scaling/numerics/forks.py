"""A batch's chunks on every core in forked children, where the process allows it.

    with forks.allowed():                 # a command whose process runs nothing else
      parts = forks.map_chunks(fn, chunks)  # [fn(c) for c in chunks], or None: use threads
      parts = forks.map_shares(fn, items)   # fn on a share of items per core, or [fn(items)]

The fits use it: Approach 3's Newton batches (`parametric.huber.on_all_cores`: its
bootstrap, and the multistart reference), and the bootstraps of Approach 2
(`isoflop.local.draws`) and Approach 1 (`envelope.fit.bootstrap_envelope`), which otherwise
refit their resamples one chunk or one resample after another (Approach 2: 1.36 s of a 2.2 s
`chinchax fit --bootstrap=4000` of 240 runs, 0.71 s forked, on the 2-core machine). A Newton batch is
hundreds of numpy operations on arrays of ~65k elements: numpy releases the GIL inside each,
yet two threads contend for it between them. There a 4,000-resample bootstrap ran 0.44 s in
two threads against 0.48 s in one (0.68 s of CPU), while two processes each ran their half
in the time one process alone takes for it. A forked child has its own interpreter and
inherits the batch's data and the function (a closure: only the result is pickled).

Forking is safe only in a process whose other threads cannot hold a lock the child needs:
`allowed` is entered by `chinchax fit`, whose process starts no thread of its own during a fit
but numpy's (OpenBLAS's pool, which re-forms itself in a child through pthread_atfork).
Library calls (a notebook, the sweep's process) never fork, nor does an allowed process
while a Python thread runs beside it (`--plots` starts one), once it has imported jax (its
runtime's threads), or off Linux (macOS's Accelerate is not fork-safe): there `map_chunks` returns None and the caller uses
threads. A child that fails in any way (an exception, killed, out of memory) has its chunk
computed again in this process, which then raises what the child raised, with its traceback
here: the result never depends on where a chunk ran.
"""

import contextlib
import os
import pickle
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

_allowed = False


@contextlib.contextmanager
def allowed():
  """Within it this process may fork for `map_chunks` (see the module's note on who may)."""
  global _allowed
  before, _allowed = _allowed, True
  try:
    yield
  finally:
    _allowed = before


def usable() -> bool:
  # jax's runtime keeps threads of its own (and warns at a fork once it has started).
  return (_allowed and sys.platform.startswith("linux") and hasattr(os, "fork")
          and threading.active_count() == 1 and "jax" not in sys.modules)


def cores() -> int:
  """The cores this process may run on: its CPU affinity (`taskset`, a container's cpuset)
  where the OS keeps one, else all the machine's. os.cpu_count() counts the machine's even
  under `taskset -c 0`, where two shares would then take turns on one core."""
  try:
    return len(os.sched_getaffinity(0)) or 1
  except AttributeError:  # macOS, Windows: no affinity
    return os.cpu_count() or 1


def map_shares(fn: Callable[[Sequence[Any]], Any], items: Sequence[Any]) -> list[Any]:
  """[fn(share) for share in shares]: `items` cut into one contiguous share per core
  (`cores`), each in a forked child (the first here) where this process may fork; else
  [fn(items)], one call here on them all."""
  n = min(cores(), len(items))
  if n < 2 or not usable():
    return [fn(items)]
  cuts = [round(i * len(items) / n) for i in range(n + 1)]
  return map_chunks(fn, [items[i:j] for i, j in zip(cuts[:-1], cuts[1:])])


def map_chunks(fn: Callable[[Any], Any], chunks: Sequence[Any]) -> list[Any] | None:
  """[fn(c) for c in chunks], the first computed here while each other runs in a forked
  child; None where this process may not fork (`usable`): the caller runs them otherwise."""
  if len(chunks) < 2 or not usable():
    return None
  kids: list[tuple[int, int]] = []  # (pid, read end) per chunk after the first; -1: none
  try:
    for chunk in chunks[1:]:
      kids.append(_fork(fn, chunk))
    out = [fn(chunks[0])]
    for i, chunk in enumerate(chunks[1:]):
      out.append(_collect(kids, i, lambda chunk=chunk: fn(chunk)))
    return out
  finally:  # this process failed or was interrupted: no child outlives the call
    for pid, fd in kids:
      _reap(pid, fd)


@contextlib.contextmanager
def ahead(fn: Callable[[], Any]):
  """Yields get(here=fn) -> fn(): computed from the block's start in a forked child while
  this process goes on, where it may fork (`usable`); else, or where the child failed,
  get() returns here() instead, computed in this process (raising what it raises). A child
  still running when the block ends is killed. `chinchax fit` refits its backtest so, beside
  Approach 3's fit and its bootstrap: the refits no longer run alone at the end."""
  kids = [_fork(lambda _: fn(), None) if usable() else (-1, -1)]

  def get(here: Callable[[], Any] = fn):
    return _collect(kids, 0, here)

  try:
    yield get
  finally:
    _reap(*kids[0])


def _collect(kids: list[tuple[int, int]], i: int, here: Callable[[], Any]) -> Any:
  """Child i's pickled value, reaped; here() where no child ran or it failed."""
  pid, fd = kids[i]
  data, status = b"", 1
  if pid > 0:
    with os.fdopen(fd, "rb") as f:
      kids[i] = (pid, -1)
      data = f.read()
    _, status = os.waitpid(pid, 0)
    kids[i] = (-1, -1)
  return pickle.loads(data) if status == 0 and data else here()


def _reap(pid: int, fd: int) -> None:
  """Closes a child's pipe and kills it, if it is still there."""
  if fd >= 0:
    os.close(fd)
  if pid > 0:
    try:
      os.kill(pid, signal.SIGKILL)
      os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
      pass


def _fork(fn, chunk) -> tuple[int, int]:
  """(pid, read end of its result's pipe), or (-1, -1) where no child could start (the
  chunk is then computed here)."""
  try:
    read_fd, write_fd = os.pipe()
  except OSError:  # out of file descriptors
    return -1, -1
  try:
    with warnings.catch_warnings():
      # Python 3.12+ warns on any fork of a process with threads; here the only other is
      # OpenBLAS's pool, which handles fork itself (`usable` checked for Python's own).
      warnings.simplefilter("ignore", DeprecationWarning)
      pid = os.fork()
  except OSError:  # out of processes or memory
    os.close(read_fd)
    os.close(write_fd)
    return -1, -1
  if pid == 0:  # the child: never returns into the caller's code, never flushes its buffers
    global _allowed
    _allowed = False  # its chunk's own batches run in it (threads), not in more children
    # A signal to the process group ends a child at once and silently: the command's own
    # handlers (its one line on SIGTERM) are the parent's, which computes what was lost.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    status = 1
    try:
      os.close(read_fd)
      data = pickle.dumps(fn(chunk), protocol=pickle.HIGHEST_PROTOCOL)
      with os.fdopen(write_fd, "wb") as f:
        f.write(data)
      status = 0
    finally:
      os._exit(status)  # pylint: disable=protected-access
  os.close(write_fd)
  return pid, read_fd
