"""The input pipeline a run calls: open a dataset once, then ask for batch k by step.

Sources: `corpus` (a directory or glob of text files, built with `text_builder`), else `name`:
"stdlib" (the default corpus) or a TFDS dataset already prepared in array_record form under
`data_dir` (default $TFDS_DATA_DIR): "chinchax_text/<name>" from `chinchax data prepare`
(`data.prepare`), "c4/en:3.0.1", read with `text_key`. Nothing is downloaded.

Tokens: each split is tokenised once, in its stored record order, into a flat `.npy` stream
(uint16, or uint32 for vocabularies over 2**16) under `cache_dir`, keyed by dataset, version,
text key, tokenizer and token cap, then memory-mapped; see `packing` for windows and order.
That costs 2 bytes per token of local disk and one pass of tokenisation per host, which is
right for corpora up to ~1e9-1e10 tokens. For larger ones, `max_train_tokens` caps the train
stream at a prefix of the split's records; TFDS stores records in a hash-shuffled order, so the
prefix is a uniform sample of documents, and a run of D tokens needs only D (or the unique
budget U) of them. An uncapped web-scale corpus would need a streaming path (a grain pipeline
over the data source with checkpointed iterator state instead of (seed, step) addressing),
which chinchax does not have.

`unique_tokens` is the length of the packed train stream (EODs included); an epoch is all
W windows once, `epoch_tokens = W * seq_len`, and a run of D tokens takes D / epoch_tokens
epochs. Evaluation reads the validation stream's first windows in order: the same batches
every time, over a fixed number of tokens.
"""

import dataclasses
import io
import math
import os
from typing import Iterator

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.sweeps.data import packing
from chinchax.sweeps.data import remote
from chinchax.sweeps.data import text_builder
from chinchax.sweeps.data import tokenizers

DEFAULT_HOME = os.path.join(os.path.expanduser("~"), ".cache", "chinchax")
_CACHE_FORMAT = "v1"  # bump when the packed-stream layout changes: old caches are not reused


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """What to read and how to cut it. `corpus`, when set, wins over `name`.

  name: "stdlib" or a prepared TFDS name ("lm1b", "c4/en:3.0.1", "chinchax_text/<cfg>").
  corpus: a directory or glob of text files, built into `data_dir` on first use.
  data_dir: TFDS data dir (local or gs://); default $TFDS_DATA_DIR, else
    ~/.cache/chinchax/tfds (`resolve_data_dir`).
  cache_dir: local dir for token streams; default data_dir/chinchax_tokens when data_dir is
    local, else ~/.cache/chinchax/tokens.
  max_train_tokens: cap the train stream at this many tokens (None: the whole split).
  """
  name: str = text_builder.STDLIB
  corpus: str | None = None
  data_dir: str | None = None
  text_key: str = "text"
  tokenizer: str = "bytes"
  spm_model: str | None = None
  seq_len: int = 256
  batch_size: int = 32
  seed: int = 0
  val_fraction: float = 0.05
  max_train_tokens: int | None = None
  cache_dir: str | None = None


@dataclasses.dataclass(frozen=True)
class Dataset:
  cfg: DataConfig
  tfds_name: str
  tokenizer: tokenizers.Tokenizer
  train: np.ndarray
  validation: np.ndarray
  order: packing.SampleOrder

  @property
  def vocab_size(self) -> int:
    return self.tokenizer.vocab_size

  @property
  def unique_tokens(self) -> int:
    return int(self.train.shape[0])

  @property
  def epoch_tokens(self) -> int:
    return self.order.W * self.cfg.seq_len

  def epochs_for(self, D: float) -> float:
    return D / self.epoch_tokens


def resolve_data_dir(data_dir: str | None = None) -> str:
  """The TFDS data dir: the one given, else $TFDS_DATA_DIR (as TFDS itself reads it), else
  ~/.cache/chinchax/tfds."""
  return data_dir or os.environ.get("TFDS_DATA_DIR") or os.path.join(DEFAULT_HOME, "tfds")


# The fields that decide a dataset's token streams; the others only cut them.
STREAM_FIELDS = ("name", "corpus", "data_dir", "text_key", "tokenizer", "spm_model",
                 "val_fraction", "max_train_tokens", "cache_dir")


def _check_cut(cfg: DataConfig) -> None:
  if cfg.seq_len <= 0 or cfg.batch_size <= 0:
    raise UserError(f"seq_len={cfg.seq_len} and batch_size={cfg.batch_size} must be positive")
  if not 0 <= cfg.seed < 1 << 63:
    raise UserError(f"seed={cfg.seed} must be a non-negative 64-bit integer")
  if cfg.max_train_tokens is not None and cfg.max_train_tokens <= cfg.seq_len:
    raise UserError(f"max_train_tokens={cfg.max_train_tokens} must exceed seq_len={cfg.seq_len}")


def _cut(cfg: DataConfig, name: str, tok, train: np.ndarray, validation: np.ndarray) -> Dataset:
  W = packing.n_windows(train.shape[0], cfg.seq_len)
  if W == 0:
    raise UserError(f"seq_len={cfg.seq_len} is longer than the {train.shape[0]}-token train split "
                    f"of {name!r}; use a shorter seq_len or a larger corpus")
  return Dataset(cfg, name, tok, train, validation, packing.SampleOrder(W, cfg.seed))


def with_config(ds: Dataset, cfg: DataConfig) -> Dataset | None:
  """`ds`'s token streams cut for `cfg`'s batch, length and seed (what `open_dataset(cfg)`
  would return, without opening anything), or None when `cfg` reads other streams."""
  if any(getattr(ds.cfg, f) != getattr(cfg, f) for f in STREAM_FIELDS):
    return None
  _check_cut(cfg)
  return _cut(cfg, ds.tfds_name, ds.tokenizer, ds.train, ds.validation)


def open_dataset(cfg: DataConfig) -> Dataset:
  """Resolves, builds (once) and tokenises (once) the dataset; checks it can serve `cfg`.

  In a multi-host job process 0 opens it first, then the others, which find it built where
  the disk is shared (two builders at once collide on TFDS's folder rename)."""
  from chinchax.sweeps.hosts import distributed  # pylint: disable=g-import-not-at-top  (jax)
  return distributed.process_0_first(lambda: _open_dataset(cfg))


def _open_dataset(cfg: DataConfig) -> Dataset:
  _check_cut(cfg)
  data_dir = resolve_data_dir(cfg.data_dir)
  if cfg.corpus is not None or cfg.name == text_builder.STDLIB:
    name = text_builder.build(cfg.corpus or text_builder.STDLIB, data_dir, cfg.val_fraction)
  else:
    name = cfg.name
  builder = _prepared_builder(name, data_dir)
  if cfg.text_key not in builder.info.features:
    raise UserError(f"TFDS dataset {name!r} has no feature {cfg.text_key!r}; text_key is one of: "
                    f"{', '.join(builder.info.features)}")
  tok = tokenizers.make_tokenizer(cfg.tokenizer, cfg.spm_model)
  cache_dir = cfg.cache_dir or (
      os.path.join(data_dir, "chinchax_tokens") if "://" not in data_dir
      else os.path.join(DEFAULT_HOME, "tokens"))
  key = os.path.join(cache_dir, _CACHE_FORMAT, builder.info.full_name.replace("/", "__"),
                     cfg.text_key, tok.name)
  sources = _sources(builder, data_dir, cache_dir)
  train = _token_stream(sources, "train", cfg.text_key, tok, key, cfg.max_train_tokens)
  validation = _token_stream(sources, "validation", cfg.text_key, tok, key, None)
  return _cut(cfg, name, tok, train, validation)


SPLITS = ("validation", "train", "all")


@dataclasses.dataclass(frozen=True)
class SplitSize:
  """How much text a split holds: its documents (a text corpus's are its files) and tokens."""

  split: str
  documents: int
  tokens: int
  unit: str  # "files" (a text corpus) or "documents" (a prepared TFDS dataset)


def open_split(cfg: DataConfig, split: str,
               max_tokens: int | None = None) -> tuple[Dataset, SplitSize]:
  """`cfg`'s data with `split` as the stream evaluation reads (`eval_batch`), and its size.

  validation: the held-out split, which a run evaluates on (`open_dataset`). train: the whole
  train split (no `max_train_tokens` cap). all: for a text corpus (`corpus`, or the `stdlib`
  name) every file, in path order, read straight from the files: no TFDS dataset is built, so
  a corpus too small to give both splits a file is scored too; for a prepared TFDS dataset its
  train split then its validation split. `max_tokens`: keep only the stream's first tokens
  (what an eval of that many reads); the size is the whole split's."""
  if split not in SPLITS:
    raise UserError(f"split {split!r} is not one of {', '.join(SPLITS)}")
  if split == "all" and _is_text(cfg):
    return _files_split(cfg)
  if split != "validation":
    cfg = dataclasses.replace(cfg, max_train_tokens=None)
  ds = open_dataset(cfg)
  parts = {"validation": [ds.validation], "train": [ds.train],
           "all": [ds.train, ds.validation]}[split]
  info = _prepared_builder(ds.tfds_name, resolve_data_dir(cfg.data_dir)).info
  names = ("train", "validation") if split == "all" else (split,)
  size = SplitSize(split, sum(int(info.splits[n].num_examples) for n in names),
                   sum(int(p.shape[0]) for p in parts), "files" if _is_text(cfg) else "documents")
  if max_tokens is not None:  # a prefix, not a copy of a whole (memory-mapped) split
    kept, left = [], max_tokens
    for p in parts:
      kept.append(p[:max(left, 0)])
      left -= kept[-1].shape[0]
    parts = kept
  stream = parts[0] if len(parts) == 1 else np.concatenate(parts)
  return dataclasses.replace(ds, validation=stream), size


def _is_text(cfg: DataConfig) -> bool:
  """Read from text files (built with `text_builder`), not a prepared TFDS dataset."""
  return cfg.corpus is not None or cfg.name == text_builder.STDLIB


def _files_split(cfg: DataConfig) -> tuple[Dataset, SplitSize]:
  """Every file of a text corpus, tokenised in path order and packed as a split is."""
  _check_cut(cfg)
  spec = cfg.corpus or text_builder.STDLIB
  corpus = text_builder.find_corpus(spec)
  tok = tokenizers.make_tokenizer(cfg.tokenizer, cfg.spm_model)
  texts = [text for _, text, _ in text_builder.documents(corpus, cfg.val_fraction)]
  if not texts:
    raise UserError(f"corpus {spec!r} has no non-empty UTF-8 text files")
  encoded = (tok.encode_batch(texts) if hasattr(tok, "encode_batch")
             else [tok.encode(t) for t in texts])
  stream = packing.pack(encoded, tok.eod_id, packing.token_dtype(tok.vocab_size))
  if packing.n_windows(stream.shape[0], cfg.seq_len) == 0:
    raise UserError(f"corpus {spec!r} holds {stream.shape[0]} tokens, less than one window "
                    f"of seq_len={cfg.seq_len}; add text")
  ds = _cut(cfg, f"{spec} (all files)", tok, stream, stream)
  return ds, SplitSize("all", len(texts), int(stream.shape[0]), "files")


def train_batch(ds: Dataset, step: int, rows: np.ndarray | None = None) -> dict:
  """Rows (default: all) of global batch `step`: {'inputs', 'targets'}, int32 [R, seq_len]."""
  samples = packing.step_samples(step, ds.cfg.batch_size, rows)
  return packing.windows_to_batch(ds.train, ds.order.windows(samples), ds.cfg.seq_len)


def n_eval_batches(ds: Dataset, n_tokens: int) -> int:
  """Batches needed to cover n_tokens targets; checks the validation split holds them."""
  B, L = ds.cfg.batch_size, ds.cfg.seq_len
  n = max(1, math.ceil(n_tokens / (B * L)))
  have = packing.n_windows(ds.validation.shape[0], L)
  if n * B > have:
    raise UserError(f"eval of {n_tokens} tokens needs {n * B} windows of {L} but the validation "
                    f"split of {ds.tfds_name!r} has {have}; lower the eval tokens or seq_len")
  return n


def eval_batch(ds: Dataset, k: int, rows: np.ndarray | None = None) -> dict:
  """Eval batch k: validation windows k*B .. k*B+B-1 in stored order (no shuffle)."""
  windows = packing.step_samples(k, ds.cfg.batch_size, rows)
  return packing.windows_to_batch(ds.validation, windows, ds.cfg.seq_len)


def eval_batches(ds: Dataset, n_tokens: int) -> Iterator[dict]:
  """The fixed eval set: ceil(n_tokens / (B*L)) batches, identical on every call."""
  for k in range(n_eval_batches(ds, n_tokens)):
    yield eval_batch(ds, k)


def eval_bytes(ds: Dataset, n_tokens: int) -> int:
  """UTF-8 bytes covered by the eval targets: bits/byte = loss * tokens / (ln 2 * bytes)."""
  return int(sum(ds.tokenizer.bytes_per_id[b["targets"]].sum()
                 for b in eval_batches(ds, n_tokens)))


def _missing(name: str, data_dir: str, where: str) -> UserError:
  return UserError(
      f"TFDS dataset {name!r} is not prepared: nothing at {where} (data_dir {data_dir!r}, "
      f"from data.data_dir or TFDS_DATA_DIR); prepare it with `chinchax data prepare "
      f"--input=FILES --out={data_dir} --name=NAME` from raw text (then data.name="
      f"chinchax_text/NAME), or `chinchax data tfds {name} --out={data_dir}` where its TFDS "
      "builder needs no TensorFlow")


def _prepared_builder(name: str, data_dir: str):
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  where = os.path.join(data_dir, *name.replace(":", "/").split("/"))
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except Exception as e:  # TFDS raises several types for unknown names/configs/versions.
    if not atomic.exists(where):  # most often: a catalogue name not prepared here
      raise _missing(name, data_dir, where) from None
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise UserError(f"unknown TFDS dataset {name!r} under data_dir={data_dir!r}: {first}") from None
  if not builder.is_prepared():
    raise _missing(name, data_dir, os.fspath(builder.data_dir))
  formats = {builder.info.file_format} | set(builder.info.alternative_file_formats)
  if "array_record" not in {getattr(f, "value", f) for f in formats}:
    raise UserError(f"TFDS dataset {name!r} is stored as {builder.info.file_format}, not "
                    "array_record; rebuild it with --file_format=array_record")
  for split in ("train", "validation"):
    if split not in builder.info.splits:
      raise UserError(f"TFDS dataset {name!r} has no {split!r} split (has: "
                      f"{', '.join(builder.info.splits)})")
  return builder


def _sources(builder, data_dir: str, cache_dir: str) -> dict:
  """The splits' record sources; on gs:// each shard is copied locally on first read
  (`remote.RemoteSplit`: open-source array_record reads local files only)."""
  if not atomic.is_remote(data_dir):
    return builder.as_data_source()
  shards = os.path.join(cache_dir, "shards", builder.info.full_name.replace("/", "__"))
  return {s: remote.RemoteSplit(builder.info, s, os.path.join(shards, s))
          for s in ("train", "validation")}


def _token_stream(sources, split: str, text_key: str, tok, key: str,
                  max_tokens: int | None) -> np.ndarray:
  """The split's packed token stream, tokenised once into `key/split[-cap].npy`."""
  path = os.path.join(key, f"{split}.npy" if max_tokens is None else f"{split}-{max_tokens}.npy")
  if not os.path.exists(path):
    source, docs, n, chunk = sources[split], [], 0, 1024
    for start in range(0, len(source), chunk):
      recs = source.__getitems__(list(range(start, min(start + chunk, len(source)))))
      texts = [_text(r[text_key]) for r in recs]
      encoded = (tok.encode_batch(texts) if hasattr(tok, "encode_batch")
                 else [tok.encode(t) for t in texts])
      for ids in encoded:
        docs.append(ids.astype(packing.token_dtype(tok.vocab_size)))
        n += ids.shape[0] + 1
      if max_tokens is not None and n >= max_tokens:
        break
    stream = packing.pack(docs, tok.eod_id, packing.token_dtype(tok.vocab_size))
    if max_tokens is not None:
      stream = stream[:max_tokens]
    buf = io.BytesIO()
    np.save(buf, stream)
    atomic.write_bytes(path, buf.getvalue())
  return np.load(path, mmap_mode="r")


def _text(x) -> str:
  return x.decode("utf-8") if isinstance(x, bytes) else str(x)
