"""File I/O of every artifact, on a local disk or an object store (`gs://bucket/...`).

A crash never leaves a half-written artifact (docs/DESIGN.md, Artifacts). Locally a write goes to
a temporary file in the same folder, then a rename. A URL goes through etils.epath (fsspec,
gcsfs for gs://): GCS has no rename, but a single-object write is atomic already, so one
write of the whole object gives the same guarantee. Nothing here appends: an object cannot
be appended to, so a writer that grows a file rewrites it whole. `os.path` would mangle a
URL (abspath("gs://b/x") is "/cwd/gs:/b/x"), which is why the workdir's code asks here.
"""

import json
import os
import tempfile
from typing import Any

from etils import epath

from chinchax.scaling.errors import UserError

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


def exists(path: PathLike) -> bool:
  return epath.Path(path).exists() if is_remote(path) else os.path.exists(path)


def isdir(path: PathLike) -> bool:
  return epath.Path(path).is_dir() if is_remote(path) else os.path.isdir(path)


def listdir(path: PathLike) -> list[str]:
  """The sorted names in a folder; none when it does not exist."""
  if not isdir(path):
    return []
  if is_remote(path):
    return sorted(p.name for p in epath.Path(path).iterdir())
  return sorted(os.listdir(path))


def makedirs(path: PathLike) -> None:
  # An object store has no folders, only name prefixes that a write makes; asking gcsfs to
  # make one would create a missing bucket (a mistyped name) instead of failing.
  if not is_remote(path):
    os.makedirs(path, exist_ok=True)


def read_bytes(path: PathLike) -> bytes | None:
  """The file's bytes, or None when it does not exist."""
  try:
    if is_remote(path):
      return epath.Path(path).read_bytes()
    with open(path, "rb") as f:
      return f.read()
  except FileNotFoundError:
    return None


def read_text(path: PathLike) -> str | None:
  """The file's text (UTF-8), or None when it does not exist."""
  data = read_bytes(path)
  return None if data is None else data.decode("utf-8")


def write_bytes(path: PathLike, data: bytes) -> None:
  if is_remote(path):
    epath.Path(path).write_bytes(data)  # one object write: atomic on GCS
    return
  path = os.fspath(path)
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
  try:
    # mkstemp makes 0600 files; artifacts are meant to be shared like any other file.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def write_text(path: PathLike, text: str) -> None:
  write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, obj: Any) -> None:
  write_text(path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n")
