"""A prepared TFDS split on gs://, read through a local copy of each shard made on first use.

The open-source array_record reads and writes local files only (google/array_record#120:
riegeli has no GCS file in its open-source build), so TFDS's own data source cannot open a
gs:// data dir. `RemoteSplit` serves the same records in the same order (shard by shard, as
the split's file instructions list them): shard i is copied to `cache_dir` the first time a
record of it is read, then read locally. A run that tokenises a prefix of the split
(`max_train_tokens`) copies only the shards that prefix touches.

`upload` is the other direction: a dataset folder prepared locally copied to gs://.
"""

import bisect
import os
import shutil

from etils import epath

from chinchax import atomic

_CHUNK = 1 << 24


def copy_file(src: str, dst: str) -> None:
  """Streams src to dst (either may be gs://); a local dst appears whole or not at all."""
  if not atomic.is_remote(dst):
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
  tmp = dst + ".partial" if not atomic.is_remote(dst) else dst  # GCS objects appear whole
  with epath.Path(src).open("rb") as fin, epath.Path(tmp).open("wb") as fout:
    shutil.copyfileobj(fin, fout, _CHUNK)
  if tmp != dst:
    os.replace(tmp, dst)


def upload(local_dir: str, remote_dir: str) -> None:
  """Copies every file under local_dir to the same relative path under remote_dir."""
  for d, _, files in os.walk(local_dir):
    for f in sorted(files):
      rel = os.path.relpath(os.path.join(d, f), local_dir)
      copy_file(os.path.join(d, f), os.path.join(remote_dir, rel))


class RemoteSplit:
  """`len()` and `__getitems__` over a split's records, like TFDS's data source."""

  def __init__(self, info, split: str, cache_dir: str):
    from array_record.python import array_record_module  # pylint: disable=g-import-not-at-top
    self._module = array_record_module
    split_info = info.splits[split]
    self._paths = [os.fspath(p) for p in split_info.filepaths]
    lengths = list(split_info.shard_lengths)
    self._starts = [0]
    for n in lengths:
      self._starts.append(self._starts[-1] + n)
    self._features = info.features
    self._cache = cache_dir
    self._readers: dict[int, object] = {}

  def __len__(self) -> int:
    return self._starts[-1]

  def _reader(self, shard: int):
    if shard not in self._readers:
      src = self._paths[shard]
      local = os.path.join(self._cache, os.path.basename(src))
      size = epath.Path(src).stat().length
      if not (os.path.exists(local) and os.path.getsize(local) == size):
        copy_file(src, local)
      self._readers[shard] = self._module.ArrayRecordReader(local, "readahead_buffer_size:0")
    return self._readers[shard]

  def __getitems__(self, keys) -> list:
    out = []
    for k in keys:
      if not 0 <= k < len(self):
        raise IndexError(f"record {k} of a split of {len(self)}")
      shard = bisect.bisect_right(self._starts, k) - 1
      record = self._reader(shard).read([k - self._starts[shard]])[0]
      out.append(self._features.deserialize_example_np(record))
    return out
