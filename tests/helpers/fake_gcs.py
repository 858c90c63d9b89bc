"""A fake `gs://` for tests, served from a local folder (no network, no gcsfs).

    def test_x(fake_gcs): ...  # the fixture is registered in tests/conftest.py

What is replaced, and why:

* fsspec's "gs"/"gcs" protocol (gcsfs in production) becomes `FakeGCS`, a folder
  `tmp_path/bucket-root` holding `<bucket>/<key>`. etils.epath, and so all of chinchax's own
  reads and writes and orbax's metadata, reach gs:// through `fsspec.filesystem("gcs")`, so
  they run the same calls here as on GCS. Two GCS traits are kept on purpose: there is no
  rename (`mv` raises: GCS objects cannot be renamed, gcsfs only copies then deletes, which
  is not atomic), and folders are name prefixes (`mkdir` does nothing; a write makes its
  parents).
* orbax writes array data through TensorStore's own GCS driver, which speaks HTTP to GCS
  and cannot be pointed at fsspec: `gcs_utils.get_kvstore_for_gcs` (the one place orbax
  builds that driver's spec) returns TensorStore's `file` driver on the same local folder.
* orbax asks the GCS API (google-cloud-storage) whether a bucket has a hierarchical
  namespace before listing or deleting steps: the fake bucket answers "no", a flat bucket.

The test's working directory is an empty folder (`Bucket.cwd`), so a test can assert that
no local `gs:` folder appeared, the mark of os.makedirs("gs://...").

Like GCS, an object write is all or nothing: the bytes go to a file outside the bucket and
replace the object when the upload closes. Faults are injected with `Bucket.faults`:

    fake_gcs.faults.add("write", "runs.jsonl", times=2)   # the next 2 uploads fail (HTTP 503)
    fake_gcs.faults.add("read", "result.json")            # every read fails: persistent

An operation ("read", "write" or "list": ls, exists, isdir, info) on a path containing the
pattern raises `HttpError` (gcsfs's error type: a message and an HTTP `code`, 503 by
default); a failed upload leaves the object as it was. `faults.raised` logs what was raised.
"""

import dataclasses
import io
import itertools
import pathlib
import sys

import pytest
from etils.epath import backend as epath_backend
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem


class HttpError(Exception):
  """What gcsfs raises once its own retries are spent (gcsfs.retry.HttpError's shape)."""

  def __init__(self, message: str, code: int):
    super().__init__(message)
    self.code = code


@dataclasses.dataclass
class _Rule:
  op: str
  pattern: str
  left: float  # times still to fail; inf: persistent
  code: int


class Faults:
  """The errors the fake bucket raises, by operation and path pattern."""

  def __init__(self):
    self.rules: list[_Rule] = []
    self.raised: list[tuple[str, str]] = []  # (op, path) of every fault raised

  def add(self, op: str, pattern: str, times: int | None = None, code: int = 503) -> None:
    assert op in ("read", "write", "list"), op
    self.rules.append(_Rule(op, pattern, float("inf") if times is None else times, code))

  def clear(self) -> None:
    self.rules.clear()

  def check(self, op: str, path: str) -> None:
    for rule in self.rules:
      if rule.op == op and rule.pattern in path and rule.left > 0:
        rule.left -= 1
        self.raised.append((op, path))
        raise HttpError(f"fake gs://: {rule.code} on {op} of {path}", rule.code)


class _Upload(io.BytesIO):
  """An object being written: it replaces the object only when the upload succeeds."""

  _ids = itertools.count()

  def __init__(self, fs: "FakeGCS", path: str):
    super().__init__()
    self._fs, self._path = fs, path

  def close(self) -> None:
    if self.closed:
      return
    data = self.getvalue()
    super().close()
    self._fs.faults.check("write", self._path)  # a failed upload: the object is unchanged
    target = pathlib.Path(self._fs._join(self._path))  # pylint: disable=protected-access
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(str(self._fs.root) + "-uploads")
    staging.mkdir(exist_ok=True)
    tmp = staging / f"{next(self._ids)}-{target.name}"
    tmp.write_bytes(data)
    tmp.replace(target)


class FakeGCS(DirFileSystem):
  """gs://BUCKET/KEY is the file ROOT/BUCKET/KEY."""

  protocol = ("gs", "gcs")
  root = None  # set by the fixture
  faults = None  # set by the fixture: a Faults
  cachable = False  # a fresh root per test

  def __init__(self, *args, **kwargs):
    del args, kwargs  # gcsfs's options (etils passes finalize_on_close=True)
    super().__init__(path=str(self.root), fs=LocalFileSystem(auto_mkdir=True))

  def open(self, path, mode="rb", *args, **kwargs):
    if any(m in mode for m in "wx"):
      upload = _Upload(self, path)
      return upload if "b" in mode else io.TextIOWrapper(upload, encoding="utf-8")
    if "r" in mode:
      self.faults.check("read", path)
    return super().open(path, mode, *args, **kwargs)

  def ls(self, path, *args, **kwargs):
    self.faults.check("list", path)
    return super().ls(path, *args, **kwargs)

  def exists(self, path, *args, **kwargs):
    self.faults.check("list", path)
    return super().exists(path, *args, **kwargs)

  def isdir(self, path):
    self.faults.check("list", path)
    return super().isdir(path)

  def info(self, path, *args, **kwargs):
    self.faults.check("list", path)
    return super().info(path, *args, **kwargs)

  def mkdir(self, path, *args, **kwargs):
    pass  # GCS folders are name prefixes; gcsfs's mkdir inside a bucket does nothing

  def makedirs(self, path, *args, **kwargs):
    pass

  async def _mkdir(self, path, *args, **kwargs):
    pass

  async def _makedirs(self, path, *args, **kwargs):
    pass

  def mv(self, path1, path2, **kwargs):
    raise OSError(f"fake gs://: no rename on GCS ({path1} -> {path2})")


@dataclasses.dataclass(frozen=True)
class Bucket:
  root: pathlib.Path  # the local folder behind gs://
  cwd: pathlib.Path   # the test's working directory, empty at the start
  faults: Faults      # errors to inject (see the module docstring)

  def local(self, url: str) -> pathlib.Path:
    """The local file behind a gs:// URL."""
    assert url.startswith("gs://"), url
    return self.root / url.removeprefix("gs://")

  def stray_local_files(self) -> list[str]:
    """What appeared in the working directory (a `gs:` folder is the classic bug)."""
    return sorted(p.name for p in self.cwd.iterdir())


@pytest.fixture
def fake_gcs(tmp_path, monkeypatch):
  from orbax.checkpoint._src.path import gcs_utils  # pylint: disable=g-import-not-at-top

  root = tmp_path / "bucket-root"
  root.mkdir()
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  monkeypatch.chdir(cwd)
  # The bucket is this process's fsspec registry: figures' worker processes would not see it.
  monkeypatch.setenv("CHINCHAX_PLOT_WORKERS", "0")
  monkeypatch.setattr(FakeGCS, "root", root)
  faults = Faults()
  monkeypatch.setattr(FakeGCS, "faults", faults)
  registry = sys.modules["fsspec.registry"]._registry
  for protocol in FakeGCS.protocol:
    monkeypatch.setitem(registry, protocol, FakeGCS)

  def file_kvstore(path: str) -> dict:
    bucket, key = gcs_utils.parse_gcs_path(path, add_trailing_slash=False)
    return {"driver": "file", "path": str(root / bucket / key)}

  monkeypatch.setattr(gcs_utils, "get_kvstore_for_gcs", file_kvstore)
  monkeypatch.setattr(gcs_utils, "is_hierarchical_namespace_enabled", lambda path: False)
  epath_backend.fsspec_backend._get_filesystem.cache_clear()  # etils caches the filesystem
  yield Bucket(root, cwd, faults)
  epath_backend.fsspec_backend._get_filesystem.cache_clear()
