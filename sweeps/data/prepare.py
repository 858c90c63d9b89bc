"""A raw text corpus into array_record shards that the pipeline reads, without TensorFlow.

    name = prepare.prepare(["gs://b/c4/en/c4-train.*.json.gz"], out="gs://b/tfds", name="c4en")

Inputs (local paths or gs:// URLs; files, folders or globs) by suffix, optionally gzipped
(`.gz`):

    .jsonl / .json   one JSON object per line; the document is its `text_key` field
    .parquet         one row per document; the `text_key` column (pyarrow)
    anything else    plain text: one file is one document, as `text_builder` reads a corpus

A document goes to `validation` iff the hash of (its source's name, its index in the file, its
bytes) falls below `val_fraction` (`text_builder.is_validation`): the split depends on the
document only, not on the order files are listed or read. Empty documents are skipped.

The result is the TFDS dataset `chinchax_text/<name>` under `out` (array_record `train` and
`validation` splits of {"text", "source"}), written by TFDS's own Python writer with
`tensorflow` never imported, and read back by name like any prepared TFDS dataset:
`data.name=chinchax_text/<name>`, `data.data_dir=<out>`. A gs:// `out` is prepared in a local
folder and uploaded (array_record writes local files only; `remote`).

The TFDS route: `prepare_tfds(name, out)` prepares a TFDS catalogue dataset in array_record
form when its builder needs no TensorFlow (builders written on `etils.epath`, and
`huggingface:<repo>/<config>` through TFDS's Hugging Face builder, which needs the `datasets`
package). Builders that read their downloads with `tf.io.gfile` (lm1b, tiny_shakespeare, c4)
need TensorFlow: use their raw files with `prepare` instead (C4: allenai/c4's json.gz).
"""

import gzip
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence

import tensorflow_datasets as tfds
from etils import epath

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.sweeps.data import remote, text_builder

NAME = text_builder.NAME  # one family of chinchax-prepared datasets: chinchax_text/<config>
_VERSION = "1.0.0"
_JSONL, _PARQUET, _TEXT = "jsonl", "parquet", "text"
_NAME_OK = re.compile(r"[a-z0-9][a-z0-9._-]*")


def file_format(path: str) -> str:
  base = os.path.basename(path).lower().removesuffix(".gz")
  if base.endswith((".jsonl", ".json", ".ndjson")):
    return _JSONL
  if base.endswith(".parquet"):
    return _PARQUET
  return _TEXT


def find_files(inputs: Sequence[str]) -> list[tuple[str, str]]:
  """(path, name relative to its input's root) of every file the inputs name, sorted."""
  out = []
  for spec in inputs:
    spec = spec.strip()
    if not spec:
      continue
    magic = any(ch in spec for ch in "*?[")
    if magic:
      parts = spec.split("/")
      i = next(i for i, p in enumerate(parts) if any(ch in p for ch in "*?["))
      root = epath.Path("/".join(parts[:i]) or ".")
      files = [p for p in root.glob("/".join(parts[i:])) if p.is_file()]
    else:
      root = epath.Path(spec)
      if root.is_file():
        files, root = [root], root.parent
      elif root.is_dir():
        files = [d / f for d, _, fs in root.walk() for f in fs  # every file, none hidden
                 if not any(s.startswith(".") for s in (d / f).relative_to(root).parts)]
      else:
        raise UserError(f"--input {spec!r} does not exist; give files, folders or globs "
                        "(local or gs://)")
    if not files:
      raise UserError(f"--input {spec!r} matches no files; check the path or glob")
    out += [(os.fspath(p), os.fspath(p.relative_to(root))) for p in files]
  if not out:
    raise UserError("no --input given: name the corpus files, folders or globs")
  return sorted(set(out))


def _open(path: str):
  f = epath.Path(path).open("rb")
  return gzip.open(f) if path.endswith(".gz") else f


def documents(path: str, text_key: str = "text") -> Iterator[str]:
  """The documents of one file, in file order (see the module docstring for formats)."""
  kind = file_format(path)
  with _open(path) as f:
    if kind == _TEXT:
      content = f.read()
      try:
        yield content.decode("utf-8")
      except UnicodeDecodeError:
        return  # not text
    elif kind == _JSONL:
      for i, line in enumerate(io.TextIOWrapper(f, encoding="utf-8")):
        if not line.strip():
          continue
        try:
          row = json.loads(line)
        except json.JSONDecodeError as e:
          raise UserError(f"{path}:{i + 1}: not a JSON line ({e.msg})") from None
        if not isinstance(row, dict) or text_key not in row:
          raise UserError(f"{path}:{i + 1}: no {text_key!r} field; set --text_key")
        yield str(row[text_key])
    else:
      import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
      table = pq.ParquetFile(f)
      if text_key not in table.schema_arrow.names:
        raise UserError(f"{path}: no {text_key!r} column (has: "
                        f"{', '.join(table.schema_arrow.names)}); set --text_key")
      for batch in table.iter_batches(columns=[text_key]):
        yield from (str(x) for x in batch.column(0).to_pylist() if x is not None)


class PreparedCorpusBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Documents of raw files -> `train`/`validation` array_record splits of {text, source}."""

  name = NAME
  VERSION = tfds.core.Version(_VERSION)
  RELEASE_NOTES = {_VERSION: "Documents of jsonl/parquet/text files, split by a hash."}

  def __init__(self, *, config: str, files=(), text_key="text", val_fraction=0.01,
               max_documents=None, **kwargs):
    self._files, self._text_key = tuple(files), text_key
    self._val_fraction, self._max = val_fraction, max_documents
    super().__init__(config=tfds.core.BuilderConfig(name=config), file_format="array_record",
                     **kwargs)

  @tfds.core.utils.classproperty
  @classmethod
  def code_path(cls):
    return None  # no download checksums next to this file (see text_builder)

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self, description="Raw text documents prepared by `chinchax data prepare`.",
        features=tfds.features.FeaturesDict(
            {"text": tfds.features.Text(), "source": tfds.features.Text()}),
        metadata=tfds.core.MetadataDict(n_files=len(self._files), text_key=self._text_key,
                                        val_fraction=self._val_fraction))

  def _split_generators(self, dl_manager):
    del dl_manager  # the files are given
    return {"train": self._generate_examples(False), "validation": self._generate_examples(True)}

  def _generate_examples(self, validation: bool):
    for key, source, text, is_val in self.split_documents():
      if is_val == validation:
        yield key, {"text": text, "source": source}

  def split_documents(self):
    """(key, source, text, is_validation) of every non-empty document, up to the cap."""
    n = 0
    for path, rel in self._files:
      for i, text in enumerate(documents(path, self._text_key)):
        if not text:
          continue
        if self._max is not None and n >= self._max:
          return
        n += 1
        key = f"{rel}:{i}"
        yield key, key, text, text_builder.is_validation(key, text.encode("utf-8"),
                                                        self._val_fraction)


def prepare(inputs: Sequence[str], out: str, name: str, text_key: str = "text",
            val_fraction: float = 0.01, max_documents: int | None = None) -> str:
  """Writes `chinchax_text/<name>` under `out` (once); returns that TFDS name."""
  if not _NAME_OK.fullmatch(name or ""):
    raise UserError(f"--name={name!r}: use lowercase letters, digits, '.', '_' and '-'")
  if not 0.0 < val_fraction < 1.0:
    raise UserError(f"--val_fraction={val_fraction} must be in (0, 1)")
  files = find_files(inputs)
  builder = PreparedCorpusBuilder(config=name, files=files, text_key=text_key,
                                  val_fraction=val_fraction, max_documents=max_documents,
                                  data_dir=out)
  if builder.is_prepared():
    return f"{NAME}/{name}"
  splits = [v for *_, v in builder.split_documents()]
  if not splits:
    raise UserError(f"{len(files)} input files hold no non-empty documents")
  if all(splits) or not any(splits):
    raise UserError(f"{len(splits)} documents are too few to give both splits one at "
                    f"--val_fraction={val_fraction}; add documents or raise it")
  if not atomic.is_remote(out):
    builder.download_and_prepare()
    return f"{NAME}/{name}"
  # array_record writes local files only: prepare in a local folder, then upload it.
  stage = tempfile.mkdtemp(prefix="chinchax-prepare-")
  try:
    PreparedCorpusBuilder(config=name, files=files, text_key=text_key,
                          val_fraction=val_fraction, max_documents=max_documents,
                          data_dir=stage).download_and_prepare()
    remote.upload(os.path.join(stage, NAME, name), os.path.join(out, NAME, name))
  finally:
    shutil.rmtree(stage, ignore_errors=True)
  return f"{NAME}/{name}"


def split_records(name: str, data_dir: str, split: str, cache_dir: str):
  """The records of a prepared split in stored order, local or gs://."""
  builder = tfds.builder(name, data_dir=data_dir)
  src = (remote.RemoteSplit(builder.info, split, cache_dir) if atomic.is_remote(data_dir)
         else builder.as_data_source()[split])
  for start in range(0, len(src), 1024):
    yield from src.__getitems__(list(range(start, min(start + 1024, len(src)))))


def prepare_tfds(name: str, out: str) -> str:
  """Prepares a TFDS catalogue dataset under `out` in array_record form, without TensorFlow."""
  try:
    builder = tfds.builder(name, data_dir=out, file_format="array_record")
  except (tfds.core.registered.DatasetNotFoundError, ValueError) as e:
    raise UserError(f"unknown TFDS dataset {name!r}: {str(e).strip().splitlines()[0]}") from None
  if not builder.is_prepared():
    try:
      builder.download_and_prepare(file_format="array_record")
    except ModuleNotFoundError as e:
      missing = (e.name or "").split(".")[0]
      if missing == "tensorflow":
        raise UserError(f"TFDS dataset {name!r} needs TensorFlow to prepare; chinchax never "
                        "installs it: run `chinchax data prepare` on its raw files "
                        "instead") from None
      raise UserError(f"preparing TFDS dataset {name!r} needs the {missing!r} package: "
                      f"pip install {missing}") from None
  return builder.info.full_name
