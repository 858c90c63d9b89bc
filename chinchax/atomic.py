"""File I/O of every artifact, on a local disk or an object store (`gs://bucket/...`).

A crash never leaves a half-written artifact (docs/DESIGN.md, Artifacts). Locally a write goes to
a temporary file in the same folder, then a rename. A URL goes through etils.epath (fsspec,
gcsfs for gs://): GCS has no rename, but a single-object write is atomic already, so one
write of the whole object gives the same guarantee. Nothing here appends: an object cannot
be appended to, so a writer that grows a file rewrites it whole. `os.path` would mangle a
URL (abspath("gs://b/x") is "/cwd/gs:/b/x"), which is why the workdir's code asks here.

An object store fails now and then (HTTP 429/5xx, a dropped connection, a timeout; gcsfs
retries some of these itself and then raises). Every call here on a URL is retried
`TRIES` times with jittered exponential backoff (`BACKOFF_S`, doubling, at most
`BACKOFF_MAX_S`); what still fails ends as a `StorageError`, one line naming the path. A retried
write rewrites the whole object, so a record is never left half-written.
"""

import json
import logging
import os
import random
import tempfile
import time
from collections.abc import Callable
from typing import Any, TypeVar


from chinchax import killpoints
from chinchax.errors import UserError


def _epath():
  """etils.epath, imported at a URL's first use: a local path never needs it (50 ms)."""
  from etils import epath  # pylint: disable=g-import-not-at-top
  return epath

TRIES = 5
BACKOFF_S = 0.5
BACKOFF_MAX_S = 8.0
# HTTP statuses worth another try (gcsfs.retry.HttpError and google-auth errors carry .code).
TRANSIENT_CODES = frozenset({408, 429, 500, 502, 503, 504})
# Client-library errors that are not OSErrors but mean "the network hiccuped".
TRANSIENT_NAMES = frozenset({"TransportError", "ClientError", "ServerDisconnectedError",
                             "ClientPayloadError", "RetryError", "ChecksumError"})
_PERMANENT = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError,
              NotADirectoryError)

T = TypeVar("T")
_sleep = time.sleep  # the backoff's wait (tests record it instead)

PathLike = str | os.PathLike


def is_remote(path: PathLike) -> bool:
  """A URL (`gs://`, `s3://`, ...) rather than a local path."""
  return "://" in os.fspath(path)


def absolute(path: PathLike) -> str:
  path = os.fspath(path)
  return path if is_remote(path) else os.path.abspath(path)


def check_backend(path: PathLike, flag: str | None = "--workdir") -> None:
  """UserError, before any work, when a URL's filesystem is not installed (gcsfs for gs://).

  `flag` names the option in the message; None for a positional argument.
  """
  path = os.fspath(path)
  if not is_remote(path):
    return
  protocol = path.split("://", 1)[0]
  try:
    import fsspec  # pylint: disable=g-import-not-at-top
    fsspec.get_filesystem_class("gcs" if protocol == "gs" else protocol)
  except (ImportError, ValueError) as e:
    hint = ("install the gcs extra: pip install 'chinchax[gcs]'" if protocol == "gs"
            else f"no filesystem for {protocol}:// ({e})")
    raise UserError(f"{f'{flag}=' if flag else ''}{path}: {hint}") from None


class StorageError(UserError):
  """An object store that kept failing (or refused) a read or write of one path."""


def transient(e: BaseException) -> bool:
  """Whether another try may succeed: throttling, a server error, a dropped connection."""
  if isinstance(e, _PERMANENT):
    return False
  code = getattr(e, "code", None)
  if isinstance(code, int):
    return code in TRANSIENT_CODES
  return isinstance(e, OSError) or type(e).__name__ in TRANSIENT_NAMES


def one_line(e: BaseException) -> str:
  text = str(e).strip().splitlines()
  return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def retried(what: str, path: PathLike, fn: Callable[[], T]) -> T:
  """`fn()` for a URL, retried on transient errors; a StorageError once they persist.

  A local path is called once: a local disk's errors do not go away by waiting.
  """
  if not is_remote(path):
    return fn()
  t0 = time.monotonic()
  for attempt in range(1, TRIES + 1):
    try:
      return fn()
    except FileNotFoundError:
      raise
    except Exception as e:  # noqa: BLE001 - classified right here
      if not transient(e):
        if isinstance(e, OSError) or isinstance(getattr(e, "code", None), int):
          raise StorageError(f"{os.fspath(path)}: could not {what} ({one_line(e)})") from e
        raise
      if attempt == TRIES:
        raise StorageError(
            f"{os.fspath(path)}: could not {what} after {TRIES} tries over "
            f"{time.monotonic() - t0:.0f} s ({one_line(e)}); check the bucket and the "
            "network, then rerun: the run resumes where it stopped") from e
      delay = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
      logging.warning("%s: %s failed (%s); try %d of %d in %.1f s", os.fspath(path), what,
                      one_line(e), attempt + 1, TRIES, delay)
      _sleep(delay)
  raise AssertionError("unreachable")


def exists(path: PathLike) -> bool:
  if is_remote(path):
    return retried("check", path, lambda: _epath().Path(path).exists())
  return os.path.exists(path)


def isdir(path: PathLike) -> bool:
  if is_remote(path):
    return retried("check", path, lambda: _epath().Path(path).is_dir())
  return os.path.isdir(path)


def listdir(path: PathLike) -> list[str]:
  """The sorted names in a folder; none when it does not exist."""
  if not isdir(path):
    return []
  if is_remote(path):
    return retried("list", path, lambda: sorted(p.name for p in _epath().Path(path).iterdir()))
  return sorted(os.listdir(path))


def makedirs(path: PathLike) -> None:
  # An object store has no folders, only name prefixes that a write makes; asking gcsfs to
  # make one would create a missing bucket (a mistyped name) instead of failing.
  if not is_remote(path):
    try:
      os.makedirs(path, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
      raise UserError(f"{os.fspath(path)}: not a folder (a file is in the way); give a "
                      "folder path") from None
    except OSError as e:  # no permission, a read-only mount, a parent under /proc or /sys
      raise UserError(f"{os.fspath(path)}: cannot create it ({e.strerror or e}); give a "
                      "folder you can write") from None


def _nearest_existing(path: str) -> str:
  while not os.path.exists(path) and os.path.dirname(path) != path:
    path = os.path.dirname(path)
  return path


def check_writable(path: PathLike, what: str, folder: bool = False) -> None:
  """UserError, before any work, when `path` cannot become a file (or with `folder`, a
  folder): it is the other kind already, a file stands where a parent folder must be, or
  the nearest existing folder refuses a new file. Checked by trying (a probe file made and
  removed there): permission bits say nothing to root, nor of a read-only mount or /proc."""
  if is_remote(path):
    return
  path = os.path.abspath(os.fspath(path))
  if os.path.isdir(path) and not folder:
    raise UserError(f"{what} {path} is a folder; give a file path, e.g. "
                    f"{os.path.join(path, 'law.json')}")
  if os.path.exists(path) and folder and not os.path.isdir(path):
    raise UserError(f"{what} {path}: not a folder (a file is in the way); give a folder path")
  base = _nearest_existing(path if folder else os.path.dirname(path))
  if not os.path.isdir(base):
    raise UserError(f"{what} {path}: {base} is a file, not a folder; give a path under a "
                    "folder")
  try:
    fd, probe = tempfile.mkstemp(dir=base, prefix=".chinchax-probe-")
    os.close(fd)
    os.unlink(probe)
  except OSError as e:
    why = e.strerror or str(e)
    if base == path:
      raise UserError(f"{what} {path}: cannot write in it ({why}); give a folder you can "
                      "write") from None
    raise UserError(f"{what} {path}: cannot create it, {base} takes no new files ({why}); "
                    "give a path you can write") from None


def read_bytes(path: PathLike) -> bytes | None:
  """The file's bytes, or None when it does not exist."""
  try:
    if is_remote(path):
      return retried("read", path, lambda: _epath().Path(path).read_bytes())
    with open(path, "rb") as f:
      return f.read()
  except FileNotFoundError:
    return None


def read_text(path: PathLike) -> str | None:
  """The file's text (UTF-8), or None when it does not exist."""
  data = read_bytes(path)
  return None if data is None else data.decode("utf-8")


def write_bytes(path: PathLike, data: bytes) -> None:
  point = "write:" + os.path.basename(os.fspath(path))
  if is_remote(path):
    killpoints.hit(point)
    # One object write: atomic on GCS (an upload that fails leaves the old object).
    retried("write", path, lambda: _epath().Path(path).write_bytes(data))
    return
  path = os.fspath(path)
  folder = os.path.dirname(os.path.abspath(path))
  makedirs(folder)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
  try:
    # mkstemp makes 0600 files; artifacts are meant to be shared like any other file.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    with os.fdopen(fd, "wb") as f:
      killpoints.hit(point, before=lambda: (f.write(data[:len(data) // 2]), f.flush()))
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def remove(path: PathLike) -> None:
  """Deletes a file; nothing when it does not exist."""
  try:
    if is_remote(path):
      retried("delete", path, lambda: _epath().Path(path).unlink())
    else:
      os.unlink(path)
  except FileNotFoundError:
    pass


def write_text(path: PathLike, text: str) -> None:
  write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, obj: Any) -> None:
  write_text(path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n")
