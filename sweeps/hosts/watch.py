"""The processes of a multi-host job keep in touch: liveness, and one stop agreed by all.

One thread per process polls the coordinator's key-value store every POLL_S: it writes this
process's heartbeat and reads everyone's (one `key_value_dir_get`), so the train loop pays
nothing per step for either.

**Lost process.** A process whose heartbeat has not changed for `heartbeat_s` seconds is lost
(kill -9, its VM gone, SIGSTOP): every other process prints one line naming it and exits with
chinchax/exit_codes.py's LOST (75, which the launchers restart) at once, from this thread,
whatever its main thread waits for (a collective that will never complete); a coordinator that
stops answering is COORDINATOR (76). A command that ends marks its process done with its exit
status (chinchax/cli): done with 0 is not missed; done with another status fails the others
still running `heartbeat_s` later, with that status where the launchers would not restart it
(a user mistake on one process is one on all), else with LOST. A command that raised first
waits that long for the thread to name the lost process, since a collective that failed
because a peer is gone (gloo: connection closed by peer) says nothing of which.

**Stop.** SIGTERM or SIGINT reaches one process, or all, at slightly different moments, and
each would otherwise stop at its own step and wait for the others in the checkpoint's
collectives forever. Instead every process counts the loop's stop checks (`stop_reason`, once
per train step, in the same order everywhere since every process runs the same program). A
process whose stop flag is set posts a request; every process's thread, on seeing one, freezes
its count (the main thread may not pass that check until an agreement is known) and publishes
it; the agreed check is the largest count published, one that every process can reach, since
each got there after dispatching the same train steps. Every process then stops at that check:
the same step, the same checkpoint, the same exit status (one reason for all). The thread, not the main thread, publishes, so a main thread blocked in a
collective does not block the agreement.
"""

import atexit
import os
import sys
import threading
import time

from chinchax import exit_codes
from chinchax.sweeps.hosts import native

POLL_S = 0.25
NS = "chinchax/watch"

_WATCH = None


def start(client, process: int, processes: int, heartbeat_s: float) -> "Watch":
  global _WATCH
  _WATCH = Watch(client, process, processes, heartbeat_s)
  atexit.register(_WATCH.close)
  return _WATCH


def finish(status: int) -> None:
  """The command ends with `status` (chinchax/cli calls this)."""
  if _WATCH is not None:
    _WATCH.finish(status)


def on_error() -> None:
  """The command raised: when that is a collective failing because another process is gone
  (gloo's "connection closed by peer"), wait for the thread to name the lost process and end
  this one, rather than leave a traceback that says nothing of which."""
  if _WATCH is not None:
    time.sleep(_WATCH.heartbeat_s + 4 * POLL_S)


def stop_reason(flag) -> str | None:
  """The stop the train loop acts on at this check: the local `flag`'s reason on one process;
  on several, the agreed one, at the same check on every process (None: go on)."""
  if _WATCH is None:
    return getattr(flag, "reason", None) or "stop" if flag else None
  return _WATCH.stop_reason(flag)


class Watch:

  def __init__(self, client, process: int, processes: int, heartbeat_s: float):
    self.c, self.me, self.P, self.heartbeat_s = client, process, processes, heartbeat_s
    self._lock = threading.Lock()
    self.passed = 0              # stop checks passed by the main thread
    self.frozen_at: int | None = None
    self.agreed: int | None = None
    self.reason: str | None = None
    self._agreed = threading.Event()
    self._posted = False
    self._flag = None            # the local stop flag the loop last checked
    self._beat = 0
    self._seen: dict[int, tuple[str, float]] = {}  # process -> (its beat, when it changed)
    self._closed = threading.Event()
    self._thread = threading.Thread(target=self._run, name="chinchax-watch", daemon=True)
    self._thread.start()

  # ----------------------------------------------------------------------- the main thread

  def stop_reason(self, flag) -> str | None:
    reason = self.check(flag)
    if reason and hasattr(flag, "set"):
      flag.set(reason)
      flag.reason = reason  # the agreed reason, for the exit status every process gives
    return reason

  def check(self, flag) -> str | None:
    self._flag = flag
    if flag and not self._posted:
      self._post(getattr(flag, "reason", None) or "stop")
    with self._lock:
      if self.frozen_at is None:
        self.passed += 1
        return None
    while not self._agreed.wait(1.0):
      pass  # a lost process ends this one from the thread
    with self._lock:
      if self.passed < self.agreed:
        self.passed += 1
        return None
      return self.reason

  def _post(self, reason: str) -> None:
    self._posted = True
    try:
      self.c.key_value_set(f"{NS}/request/{self.me}", reason)
    except Exception:  # noqa: BLE001 - posted already (the thread saw the flag first)
      pass

  def finish(self, status: int) -> None:
    """This process ends with `status`: 0 is not missed by the others; any other status fails
    them too if they are still running `heartbeat_s` later (waiting on this one, in vain)."""
    native.ending(status)
    try:
      self.c.key_value_set(f"{NS}/beat/{self.me}", f"done {status}", allow_overwrite=True)
    except Exception:  # noqa: BLE001 - the coordinator may be gone already
      pass
    self.close()

  def close(self) -> None:
    """Stops the thread and waits for a poll in flight: a process that has ended must not
    then report a lost peer and exit with another status than its own."""
    self._closed.set()
    if threading.current_thread() is not self._thread:
      self._thread.join(timeout=2.0)  # a poll blocked on a coordinator that is gone

  # ----------------------------------------------------------------------- the thread

  def _run(self) -> None:
    while not self._closed.wait(POLL_S):
      try:
        self._beat += 1
        self.c.key_value_set(f"{NS}/beat/{self.me}", str(self._beat), allow_overwrite=True)
        entries = dict(self.c.key_value_dir_get(NS + "/"))
      except Exception as e:  # noqa: BLE001
        if self._closed.is_set():
          return
        _lost(f"lost the job's coordinator (process 0): {str(e).splitlines()[0][:200]}",
              exit_codes.COORDINATOR)
        return
      if self._closed.is_set():  # this process ended while the poll was in flight
        return
      self._liveness(entries)
      self._stop(entries)

  def _liveness(self, entries: dict[str, str]) -> None:
    now = time.monotonic()
    for q in range(self.P):
      if q == self.me:
        continue
      beat = entries.get(f"{NS}/beat/{q}")
      if beat == "done 0":
        continue
      last = self._seen.get(q)
      if last is None or last[0] != beat:
        self._seen[q] = (beat, now)
      elif now - last[1] > self.heartbeat_s:
        if beat and beat.startswith("done"):
          status = int(beat.split()[1])
          _lost(f"process {q} of the job ended with exit status {status}",
                status if status in exit_codes.NO_RESTART else exit_codes.LOST)
        else:
          _lost(f"lost process {q} of the job: no heartbeat for {self.heartbeat_s:g} s",
                exit_codes.LOST)

  def _stop(self, entries: dict[str, str]) -> None:
    if self.agreed is not None:
      return
    if not self._posted and self._flag:
      self._post(getattr(self._flag, "reason", None) or "stop")
    requests = sorted((int(k.rsplit("/", 1)[1]), v) for k, v in entries.items()
                      if k.startswith(f"{NS}/request/"))
    if not requests:
      return
    if self.frozen_at is None:
      with self._lock:
        self.frozen_at = self.passed
      # With the count, the reason this process saw first: every process takes the one of the
      # lowest-numbered count, so all read the same reason whatever order requests came in.
      self.c.key_value_set(f"{NS}/at/{self.me}", f"{self.frozen_at} {requests[0][1]}")
      return  # the others' counts come in the next polls
    at = {int(k.rsplit("/", 1)[1]): v.split(" ", 1) for k, v in entries.items()
          if k.startswith(f"{NS}/at/")}
    done = {q for q in range(self.P) if (entries.get(f"{NS}/beat/{q}") or "").startswith("done")}
    if all(q in at or q in done for q in range(self.P)):
      with self._lock:
        self.reason = at[min(at)][1]
        self.agreed = max(int(n) for n, _ in at.values())
      self._agreed.set()


def _lost(line: str, status: int) -> None:
  native.exit_if_claimed(status)  # jax's abort may be ending this process already
  print(f"chinchax: error: {native.where()}{line}; this process stops too (exit status "
        f"{status}). Rerun the "
        f"job (every process) to resume from the last checkpoint{native.kept()}",
        file=sys.stderr, flush=True)
  os._exit(status)  # the main thread may be inside a collective that never returns
