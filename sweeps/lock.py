"""One writer per workdir: `chinchax sweep` and `chinchax train` hold WORKDIR/chinchax.lock.

A second process on the same workdir is refused in one line naming the holder (pid, host,
since) and what to do. A holder that dies, even by SIGKILL, does not hold the lock forever:

* Local disk: an exclusive `flock` on the file, which the kernel drops when the holder's
  process ends, however it ends. The file holds the holder's details for the refusal.
* Object store (gs://), or a filesystem without flock: a lease. The holder writes its details
  with the time and rewrites them every RENEW_S from a thread; a lock whose holder is a dead
  pid on this host, or that was not renewed for LEASE_S, is stale and taken over. Taking it
  is a write then, SETTLE_S later, a read-back: of two processes that took it at once, the one
  whose write did not last sees the other's token and backs off. (GCS's conditional writes
  would close the remaining window, but fsspec does not expose them.)

Only process 0 of a multi-host job takes the lock: the other processes are the same job, and
learn its outcome from the coordinator (a second job is refused on every one of its processes).
"""

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid

from chinchax import atomic
from chinchax import pids
from chinchax.errors import UserError

NAME = "chinchax.lock"
LEASE_S = 300.0
RENEW_S = 60.0
SETTLE_S = 2.0
_wait = time.sleep  # the settle before the read-back (tests replace it)


def _me(what: str) -> dict:
  return {"what": what, "pid": os.getpid(), "host": socket.gethostname(),
          "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
          "renewed": time.time(), "token": uuid.uuid4().hex}


def _parse(text: str | None) -> dict | None:
  try:
    holder = json.loads(text or "")
  except json.JSONDecodeError:
    return None
  return holder if isinstance(holder, dict) and "pid" in holder else None


def _describe(holder: dict | None) -> str:
  if holder is None:
    return "another process (starting up)"
  return (f"{holder.get('what', 'chinchax')} (pid {holder.get('pid')} on "
          f"{holder.get('host')}, since {holder.get('since')})")


def _refusal(path: str, holder: dict | None, lease: bool) -> UserError:
  workdir = os.path.dirname(path)
  pid, host = (holder or {}).get("pid", "?"), (holder or {}).get("host", "?")
  freed = (f"; a holder that stops renewing {NAME} is ignored after {LEASE_S:.0f} s" if lease
           else "")
  return UserError(f"{workdir} is in use by {_describe(holder)}; wait for it to end or stop it "
                   f"(kill {pid} on {host}), then rerun{freed}")


class _FlockLock:
  """A local lock: flock on an open file, released by the kernel when the process ends."""

  def __init__(self, path: str, what: str):
    self.path = path
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      raise _refusal(path, _parse(atomic.read_text(path)), lease=False) from None
    except OSError:
      os.close(fd)
      raise
    self._fd = fd
    previous = _parse(os.pread(fd, 1 << 16, 0).decode("utf-8", "replace"))
    if previous is not None:  # the file is emptied on release: its holder died holding it
      logging.warning("%s: its holder %s ended without releasing it; taking over", path,
                      _describe(previous))
    data = json.dumps(_me(what)).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)

  def release(self, remove: bool = False) -> None:
    if remove:  # while still held, so that no one takes the file being removed
      os.unlink(self.path)
    else:
      os.ftruncate(self._fd, 0)
    fcntl.flock(self._fd, fcntl.LOCK_UN)
    os.close(self._fd)


class _LeaseLock:
  """An object-store lock: a lease renewed by a thread, stale when not renewed or pid dead."""

  def __init__(self, path: str, what: str):
    self.path = path
    holder = _parse(atomic.read_text(path))
    if holder is not None and not _stale(holder):
      raise _refusal(path, holder, lease=True)
    if holder is not None:
      logging.warning("%s: its holder %s is gone (%s); taking over", path, _describe(holder),
                      _stale(holder))
    self._me = _me(what)
    atomic.write_text(path, json.dumps(self._me))
    _wait(SETTLE_S)
    now = _parse(atomic.read_text(path))
    if now is None or now.get("token") != self._me["token"]:
      raise _refusal(path, now, lease=True)
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._renew, name="chinchax-lock", daemon=True)
    self._thread.start()

  def _renew(self) -> None:
    while not self._stop.wait(RENEW_S):
      try:
        self._me["renewed"] = time.time()
        atomic.write_text(self.path, json.dumps(self._me))
      except Exception as e:  # noqa: BLE001 - the next renewal tries again
        logging.warning("%s: could not renew the lock (%s)", self.path, atomic.one_line(e))

  def release(self, remove: bool = False) -> None:
    self._stop.set()
    self._thread.join()
    current = _parse(atomic.read_text(self.path))
    if current is not None and current.get("token") == self._me["token"]:
      if remove:
        atomic.remove(self.path)
      else:
        atomic.write_text(self.path, "")  # released; an empty lock is free


def _stale(holder: dict) -> str | None:
  """Why a lease holder no longer holds the lock, or None while it does."""
  pid = holder.get("pid")
  if holder.get("host") == socket.gethostname() and isinstance(pid, int) and not pids.alive(pid):
    return "its process is not running"
  age = time.time() - float(holder.get("renewed", 0))
  if age > LEASE_S:
    return f"not renewed for {age:.0f} s"
  return None


def acquire(workdir: str, what: str):
  """Takes WORKDIR's lock (UserError when another process holds it); `.release()` it."""
  atomic.check_writable(workdir, "--workdir", folder=True)
  atomic.makedirs(workdir)
  path = os.path.join(atomic.absolute(workdir), NAME)
  if atomic.is_remote(path):
    return _LeaseLock(path, what)
  try:
    return _FlockLock(path, what)
  except PermissionError as e:
    raise UserError(f"{workdir}: cannot write in it ({e.strerror}); give a folder you can "
                    "write") from None
  except OSError as e:
    if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
      raise
    return _LeaseLock(path, what)  # a filesystem without flock


@contextlib.contextmanager
def hold(workdir: str, what: str):
  """The workdir's lock for the length of the block, taken by process 0 for the whole job: a
  refusal is raised on every process of the job."""
  import jax  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.hosts import distributed  # pylint: disable=g-import-not-at-top
  lead = jax.process_index() == 0
  created = lead and not atomic.exists(workdir)
  lock = distributed.shared_outcome("lock", lambda: acquire(workdir, what))
  if not lead:
    yield None
    return
  try:
    yield lock
  finally:
    # A run refused before it wrote anything leaves nothing, not even the folder.
    only_lock = created and atomic.listdir(workdir) == [NAME]
    lock.release(remove=only_lock)
    if only_lock and not atomic.is_remote(workdir):
      with contextlib.suppress(OSError):
        os.rmdir(workdir)
