"""What native code prints in a process of a multi-host job, and jax's runtime ending it.

Native libraries write to file descriptors 1 and 2 themselves: gloo's "[Gloo] Rank 0 is
connected to 3 peer ranks" for every collective group of every job, XLA's log lines, and,
when the job's coordination service fails (process 0 gone), jax's client ends the process
with a fatal log line, a C++ stack trace and abort(). `aside` points both descriptors at one
log per process, $TMPDIR/chinchax-native-P-PID.log; Python's sys.stdout and sys.stderr keep
the command's, so chinchax's own lines and Python's tracebacks stay where they were.

abort() raises SIGABRT in the thread that failed, and the process is gone before a Python
signal handler could run (those run in the main thread, between bytecodes); a handler given
to libc through ctypes runs in that thread. It reads the log's end: jax's report of a
coordination service it can no longer reach is one line and exit_codes.COORDINATOR (76),
its report of processes whose heartbeats stopped one line and exit_codes.LOST (75); any other
abort is one line naming the log, and the abort goes on (134). jax's own callback
for that failure cannot be used instead: jaxlib cannot hand its status to Python
(std::bad_cast inside the callback, which aborts too).

Other paths end a process whose job is lost too (watch.py's heartbeat thread, the watchdog,
the join timer), and one of them can find it at the moment jax aborts: the first to
`claim_exit` says why and ends the process; the others wait for it, then end the process with
its status themselves if it has not, saying nothing.

The log goes when the process ends, by any path chinchax takes (`kept`, called before each
os._exit as well), if it holds gloo's lines alone or the command succeeded; otherwise it is
kept, and the process's last line names it.
"""

import atexit
import ctypes
import logging
import os
import re
import signal
import sys
import tempfile
import time

from chinchax import exit_codes

# gloo's connection line, once per collective group; threads that connect at once interleave
# theirs ("[Gloo] Rank [Gloo] Rank 3 is connected to ...", then "2 is connected to ...").
ROUTINE = re.compile(r"\[Gloo\] Rank |\d+ is connected to \d+ peer ranks\. Expected number "
                     r"of connected peer ranks is : \d+")
# jax's fatal line's status when the coordination service is gone (closed: killed) or stops
# answering this process's heartbeats (frozen, its host unreachable).
COORDINATOR_GONE = ("Failed to send RPC to coordination service",
                    "leader task was preempted/died",
                    "DEADLINE_EXCEEDED: Deadline Exceeded\n\nRPC: /xla.coordination."
                    "CoordinationService/Heartbeat")
# The coordination service's word for processes whose heartbeats stopped (its next line names
# them), which process 0 hands to every process still there.
UNHEALTHY = re.compile(r"tasks are unhealthy \(stopped sending heartbeats\):\s*\n([^\n]*)")
TAIL_BYTES = 16384
SAY_S = 5.0  # how long a path that lost the claim waits for the first one to say its line

_state = {"path": None, "where": "", "status": None}
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
_handler = None  # kept referenced: libc holds a raw pointer to it


def aside(process, processes) -> str:
  """Points file descriptors 1 and 2 at this process's native log and takes SIGABRT; returns
  the log's path."""
  name = f"chinchax-native-{'' if process is None else f'{process}-'}{os.getpid()}.log"
  path = os.path.join(tempfile.gettempdir(), name)
  log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  for fd, stream in ((1, "stdout"), (2, "stderr")):
    old = getattr(sys, stream)
    old.flush()
    kept = os.dup(fd)
    os.dup2(log, fd)
    new = open(kept, "w", buffering=1, encoding=old.encoding,  # noqa: SIM115
               errors=old.errors)
    setattr(sys, stream, new)
    _repoint(old, new)
  os.close(log)
  where = "this process" if process is None else f"process {process} of {processes}"
  _state.update(path=path, where=where)
  _take_abort()
  atexit.register(_at_exit)
  return path


def _repoint(old, new) -> None:
  """Log handlers made before the swap (absl's, at its import) hold the old stream object,
  whose descriptor is now the log's: they follow sys.stdout and sys.stderr."""
  handlers = [h for lg in (logging.getLogger(), *logging.Logger.manager.loggerDict.values())
              for h in getattr(lg, "handlers", ())]
  if "absl.logging" in sys.modules:
    handlers.append(sys.modules["absl.logging"].get_absl_handler().python_handler)
  for h in handlers:
    if isinstance(h, logging.StreamHandler) and h.stream is old:
      h.setStream(new)


def where() -> str:
  """"process P of N: " once this process's native output is aside, for its last line."""
  return f"{_state['where']}: " if _state["where"] else ""


def ending(status: int) -> None:
  """The command ends with `status` (sweeps/hosts/watch.py's finish)."""
  _state["status"] = status


def claim_exit(status: int) -> int | None:
  """Two paths can find the job lost at once: watch.py's thread (an RPC to the coordinator
  fails) and jax's own abort (this file's handler). The first to claim says why in one line
  and ends the process with `status` (None is returned to it); a later one gets the first's
  status and ends the process with it, saying nothing. Without it, an abort that came while
  watch.py's thread was ending the process printed a second line, found the log already
  handed over and ended the process by SIGABRT (134) instead of 76."""
  token = object()
  first = _state.setdefault("exit", (token, status))  # atomic: one wins
  return None if first[0] is token else first[1]


def exit_if_claimed(status: int) -> None:
  """Claims the exit with `status` (`claim_exit`); when another path claimed it first, ends the
  process with that path's status, saying nothing. That path ends the process itself once it
  has said its line, so this one waits for it (SAY_S at most): ending the process at once
  could come between the other's claim and its line, and the process ended with its status
  and no word (process 1 of the multi-host test, its coordinator killed, once in CI)."""
  other = claim_exit(status)
  if other is not None:
    time.sleep(SAY_S)
    os._exit(other)


def kept() -> str:
  """Removes the log when it says nothing worth keeping; else "; ... is in PATH", for the
  process's last line to name it."""
  path = _state["path"]
  if path is None:
    return ""
  _state["path"] = None
  try:
    with open(path, errors="replace") as f:
      routine = not ROUTINE.sub("", f.read()).strip()
    if routine or _state["status"] in (exit_codes.DONE, exit_codes.USER):
      os.remove(path)
      return ""
  except OSError:
    return ""
  return f"; what native libraries printed (XLA, gloo) is in {path}"


def _at_exit() -> None:
  said = kept()
  if said:  # the command failed, and no line of chinchax's names the log
    print(f"chinchax: {_state['where']}: {said[2:]}", file=sys.stderr, flush=True)


def _tail(path: str) -> str:
  try:
    with open(path, "rb") as f:
      f.seek(max(0, os.path.getsize(path) - TAIL_BYTES))
      return f.read().decode(errors="replace")
  except OSError:
    return ""


def _take_abort() -> None:
  global _handler
  libc = ctypes.CDLL(None)
  libc.signal.restype = ctypes.c_void_p
  libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]

  def on_abort(_):
    path = _state["path"]  # None once another path claimed the exit and handed the log over
    tail = _tail(path) if path else ""
    where = _state["where"]
    if any(s in tail for s in COORDINATOR_GONE):
      status = exit_codes.COORDINATOR
      exit_if_claimed(status)
      print(f"chinchax: error: {where}: lost the job's coordinator (process 0): jax's client "
            f"can no longer reach it; this process stops too (exit status {status}). Rerun "
            f"the job (every process) to resume from the last checkpoint{kept()}",
            file=sys.stderr, flush=True)
      os._exit(status)
    lost = UNHEALTHY.search(tail)
    if lost:
      status = exit_codes.LOST
      exit_if_claimed(status)
      print(f"chinchax: error: {where}: lost process {lost.group(1).strip()} of the job: jax's "
            f"coordination service saw its heartbeats stop; this process stops too (exit "
            f"status {status}). Rerun the job (every process) to resume from the last "
            f"checkpoint{kept()}", file=sys.stderr, flush=True)
      os._exit(status)
    exit_if_claimed(exit_codes.ABORT)
    print(f"chinchax: error: {where}: jax's runtime aborted this process (exit status "
          f"{exit_codes.ABORT}). Rerun the job (every process) to resume from the last "
          f"checkpoint{kept()}", file=sys.stderr, flush=True)
    libc.signal(signal.SIGABRT, None)  # SIG_DFL: abort() goes on when this returns

  _handler = _HANDLER(on_abort)
  libc.signal(signal.SIGABRT, ctypes.cast(_handler, ctypes.c_void_p))
