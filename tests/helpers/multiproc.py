"""A real multi-host job in a test: P processes x K CPU devices joined by jax.distributed on a
loopback port, started with the launchers' environment (chinchax/launch/multiproc.py).

    with multiproc.Job(["train", *args], processes=2, devices=2, tmp=tmp_path) as job:
      job.wait_for(lambda: job.saw("step 8/"), timeout=60)
      job.signal(signal.SIGTERM)          # every process, as a preemption; or ranks=[1]
      results = job.wait(timeout=60)      # [Result(rank, rc, out, err, wall_s), ...]

Every process's stdout and stderr go to files under `tmp` (no pipe to fill up). The processes
share one process group, which is SIGKILLed when the deadline passes or the block is left, so
that a hang fails the test (`Hang`, with every process's output) instead of stalling CI.
"""

import dataclasses
import os
import signal
import subprocess
import sys
import time

from chinchax.launch import multiproc as launcher

from tests.helpers import train_util as tu

CHILD = os.path.join(tu.ROOT, "tests", "helpers", "multiproc_child.py")


@dataclasses.dataclass(frozen=True)
class Result:
  rank: int
  rc: int | None   # None: still running when the deadline killed the group
  out: str
  err: str
  wall_s: float    # from the start to its exit (or the deadline)


class Hang(AssertionError):
  pass


def env(cache_dir: str, pause_from: int = 0, pause_s: float = 0.0) -> dict[str, str]:
  """A child's base environment: tu.child_env's cheap compiles, cache and pauses; the launcher
  then adds the multi-host variables and the device count."""
  return tu.child_env(cache_dir, 1, pause_from, pause_s)


class Job:

  def __init__(self, args, *, tmp, processes: int = 2, devices: int = 2,
               deadline_s: float = 120.0, base_env: dict | None = None, script: str = "",
               overrides=None, port: int = 0):
    """`args`: the chinchax command line after `chinchax` (`train ...`, `sweep ...`), or a
    function of the rank that gives it, run by
    tests/helpers/multiproc_child.py (`chinchax` with train_child.py's pauses), or by
    `script` (a Python file given `args`). `overrides(rank)`: variables over that process's
    environment (launch/multiproc.py's `start`); `port`: the coordinator's (0: a free one)."""
    self.tmp, self.P = str(tmp), processes
    os.makedirs(self.tmp, exist_ok=True)
    base = base_env if base_env is not None else env(os.path.join(self.tmp, "xla-cache"))
    self._files = {}
    self.t0 = time.monotonic()
    self.deadline = self.t0 + deadline_s

    def log(kind):
      return lambda rank: self._open(rank, kind)
    child = script or CHILD
    cmd = ((lambda rank: [sys.executable, child, *args(rank)]) if callable(args)
           else [sys.executable, child, *args])
    self.procs = launcher.start(cmd, processes, devices, port, env=base, cwd=tu.ROOT,
                                stdout=log("out"), stderr=log("err"), overrides=overrides)
    self.ended: dict[int, float] = {}

  def _open(self, rank: int, kind: str):
    f = open(os.path.join(self.tmp, f"p{rank}.{kind}"), "w")
    self._files[(rank, kind)] = f
    return f

  def text(self, rank: int, kind: str = "both") -> str:
    kinds = ("out", "err") if kind == "both" else (kind,)
    out = []
    for k in kinds:
      with open(os.path.join(self.tmp, f"p{rank}.{k}")) as f:
        out.append(f.read())
    return "".join(out)

  def saw(self, needle: str, ranks=None) -> bool:
    """`needle` in the output of every rank of `ranks` (default all)."""
    return all(needle in self.text(r) for r in (range(self.P) if ranks is None else ranks))

  def _poll(self) -> None:
    for r, q in enumerate(self.procs):
      if r not in self.ended and q.poll() is not None:
        self.ended[r] = time.monotonic()

  def wait_for(self, predicate, timeout: float, poll_s: float = 0.05) -> float:
    """Waits until `predicate()`; returns the seconds waited. Hang if it never comes true or
    every process has ended first."""
    t = time.monotonic()
    end = min(t + timeout, self.deadline)
    while not predicate():
      self._poll()
      if len(self.ended) == self.P or time.monotonic() > end:
        self.kill()
        raise Hang(f"waited {time.monotonic() - t:.0f} s in vain\n{self.report()}")
      time.sleep(poll_s)
    return time.monotonic() - t

  def signal(self, sig: int, ranks=None) -> float:
    """Sends `sig` to the processes of `ranks` (default all); returns when (monotonic)."""
    for r in range(self.P) if ranks is None else ranks:
      if self.procs[r].poll() is None:
        self.procs[r].send_signal(sig)
    return time.monotonic()

  def wait(self, timeout: float | None = None) -> list[Result]:
    """Every process's result; on the deadline the group is killed and Hang raised."""
    end = self.deadline if timeout is None else min(self.deadline, time.monotonic() + timeout)
    while len(self.ended) < self.P and time.monotonic() < end:
      self._poll()
      time.sleep(0.05)
    self._poll()
    hung = len(self.ended) < self.P
    if hung:
      self.kill()
    results = self.results()
    if hung:
      raise Hang(f"not every process ended in time\n{self.report()}")
    return results

  def results(self) -> list[Result]:
    self._close()
    now = time.monotonic()
    return [Result(r, q.returncode, self.text(r, "out"), self.text(r, "err"),
                   self.ended.get(r, now) - self.t0) for r, q in enumerate(self.procs)]

  def report(self) -> str:
    self._close()
    parts = []
    for r, q in enumerate(self.procs):
      parts.append(f"--- process {r}: exit {q.poll()}\n{self.text(r)[-3000:]}")
    return "\n".join(parts)

  def kill(self) -> None:
    """SIGKILL to the whole group (every process of the job and whatever they started)."""
    try:
      os.killpg(self.procs[0].pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    for q in self.procs:
      try:
        q.wait(timeout=10)
      except subprocess.TimeoutExpired:
        q.kill()

  def _close(self) -> None:
    for f in self._files.values():
      if not f.closed:
        f.flush()

  def __enter__(self) -> "Job":
    return self

  def __exit__(self, *exc) -> None:
    self.kill()
    for f in self._files.values():
      f.close()
