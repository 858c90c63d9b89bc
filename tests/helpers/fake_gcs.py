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
"""

import dataclasses
import pathlib
import sys

import pytest
from etils.epath import backend as epath_backend
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem


class FakeGCS(DirFileSystem):
  """gs://BUCKET/KEY is the file ROOT/BUCKET/KEY."""

  protocol = ("gs", "gcs")
  root = None  # set by the fixture
  cachable = False  # a fresh root per test

  def __init__(self, *args, **kwargs):
    del args, kwargs  # gcsfs's options (etils passes finalize_on_close=True)
    super().__init__(path=str(self.root), fs=LocalFileSystem(auto_mkdir=True))

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
  monkeypatch.setattr(FakeGCS, "root", root)
  registry = sys.modules["fsspec.registry"]._registry
  for protocol in FakeGCS.protocol:
    monkeypatch.setitem(registry, protocol, FakeGCS)

  def file_kvstore(path: str) -> dict:
    bucket, key = gcs_utils.parse_gcs_path(path, add_trailing_slash=False)
    return {"driver": "file", "path": str(root / bucket / key)}

  monkeypatch.setattr(gcs_utils, "get_kvstore_for_gcs", file_kvstore)
  monkeypatch.setattr(gcs_utils, "is_hierarchical_namespace_enabled", lambda path: False)
  epath_backend.fsspec_backend._get_filesystem.cache_clear()  # etils caches the filesystem
  yield Bucket(root, cwd)
  epath_backend.fsspec_backend._get_filesystem.cache_clear()
