"""Tokenizers: raw UTF-8 bytes (the default) and SentencePiece.

Both expose `vocab_size`, `eod_id`, `pad_id`, `encode(str) -> int32[n]`, `decode(ids) -> str`,
`name` (a cache key) and `bytes_per_id`: an int64 table, indexed by token id, of the UTF-8 bytes
each id stands for (0 for specials). Summing it over the target ids of an eval set gives the
bytes those targets cover, so bits-per-byte = loss_nats * n_tokens / (ln 2 * n_bytes).

Bytes: ids 0..255 are the bytes themselves, `EOD = 256` ends a document, `PAD = 257`;
`vocab_size = 258`.

SentencePiece: `eod_id` is the model's `</s>` (eos) id and `pad_id` its pad id, or the eos id
when the model has no pad piece. `train_sentencepiece` makes lossless models for code and
prose: byte fallback, no normalisation, no dummy prefix, whitespace kept as is, ids
pad=0, eod=1, unk=2 (no bos). For those `bytes_per_id` is exact; for a foreign model with a
dummy prefix it counts one extra byte per encoded string.
"""

import hashlib
import io
from typing import Iterable, Protocol

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.numerics import forks


class Tokenizer(Protocol):
  name: str
  vocab_size: int
  eod_id: int
  pad_id: int
  bytes_per_id: np.ndarray

  def encode(self, text: str) -> np.ndarray: ...
  def decode(self, ids) -> str: ...


class BytesTokenizer:
  """UTF-8 bytes as tokens; the two ids above 255 are the specials."""

  EOD, PAD = 256, 257
  name = "bytes"
  vocab_size = 258
  eod_id = EOD
  pad_id = PAD

  def __init__(self):
    self.bytes_per_id = np.concatenate([np.ones(256, np.int64), np.zeros(2, np.int64)])

  def encode(self, text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int32)

  def decode(self, ids) -> str:
    ids = np.asarray(ids)
    return ids[ids < 256].astype(np.uint8).tobytes().decode("utf-8", errors="replace")


class SentencePieceTokenizer:
  """A SentencePiece model file; `name` is keyed on the file's bytes (a cache key)."""

  def __init__(self, model_path: str):
    import sentencepiece as spm  # pylint: disable=g-import-not-at-top
    proto = atomic.read_bytes(model_path)  # local or gs://: every host reads the same file
    if proto is None:
      raise UserError(f"SentencePiece model {model_path!r} does not exist; "
                      "train one with `chinchax tokenizer` or give the path of a .model file")
    try:
      self._sp = spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError as e:
      raise UserError(f"{model_path!r} is not a SentencePiece model ({e})") from None
    self.name = "spm-" + hashlib.sha256(proto).hexdigest()[:12]
    self.vocab_size = int(self._sp.get_piece_size())
    if self._sp.eos_id() < 0:
      raise UserError(f"SentencePiece model {model_path!r} has no </s> piece to end documents; "
                      "train it with an eos id (chinchax tokenizer does)")
    self.eod_id = int(self._sp.eos_id())
    self.pad_id = int(self._sp.pad_id()) if self._sp.pad_id() >= 0 else self.eod_id
    self.bytes_per_id = np.array(
        [_piece_bytes(self._sp, i) for i in range(self.vocab_size)], np.int64)

  def encode(self, text: str) -> np.ndarray:
    return np.asarray(self._sp.encode(text), np.int32)

  def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
    return [np.asarray(x, np.int32) for x in self._sp.encode(texts, num_threads=forks.cores())]

  def decode(self, ids) -> str:
    return self._sp.decode([int(i) for i in np.asarray(ids)])


def _piece_bytes(sp, i: int) -> int:
  if sp.is_control(i) or sp.is_unknown(i):
    return 0
  if sp.is_byte(i):
    return 1
  return len(sp.id_to_piece(i).replace("\u2581", " ").encode("utf-8"))


def make_tokenizer(kind: str, spm_model: str | None = None) -> Tokenizer:
  if kind == "bytes":
    return BytesTokenizer()
  if kind in ("spm", "sentencepiece"):
    if not spm_model:
      raise UserError("tokenizer='spm' needs spm_model=PATH to a SentencePiece .model file")
    return SentencePieceTokenizer(spm_model)
  raise UserError(f"unknown tokenizer {kind!r}; one of: bytes, spm")


def check_vocab(tokenizer: Tokenizer, model_vocab: int, multiple_of: int = 1) -> None:
  """The model's vocabulary must be the tokenizer's, rounded up to `multiple_of`.

  A smaller model vocabulary would index out of the embedding table (which JAX clamps
  silently); a larger one that is not padding changes N for nothing.
  """
  want = -(-tokenizer.vocab_size // multiple_of) * multiple_of
  if model_vocab != want:
    raise UserError(
        f"model vocab_size={model_vocab} does not match the {tokenizer.name} tokenizer's "
        f"{tokenizer.vocab_size} ids (expected {want} with multiple_of={multiple_of}); "
        f"set the model's vocab_size to {want}")


def train_sentencepiece(texts: Iterable[str], vocab_size: int, model_type: str = "bpe",
                        max_sentences: int = 2_000_000,
                        max_sentence_length: int = 1 << 16) -> bytes:
  """Trains a lossless SentencePiece model on `texts`; returns the serialised model proto.

  Each text is cut into lines for the trainer (SentencePiece learns from sentences); newlines
  still survive encoding through byte fallback. At most `max_sentences` lines, sampled by
  SentencePiece, are used.
  """
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top

  def sentences():
    for t in texts:
      yield from (line for line in t.split("\n") if line.strip())

  model = io.BytesIO()
  try:
    spm.SentencePieceTrainer.train(
        sentence_iterator=sentences(), model_writer=model, vocab_size=vocab_size,
        model_type=model_type, byte_fallback=True, normalization_rule_name="identity",
        add_dummy_prefix=False, remove_extra_whitespaces=False, split_digits=True,
        allow_whitespace_only_pieces=True, max_sentence_length=max_sentence_length,
        input_sentence_size=max_sentences, shuffle_input_sentence=True,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, hard_vocab_limit=True,
        minloglevel=2)
  except RuntimeError as e:
    raise UserError(f"SentencePiece training failed: {str(e).strip().splitlines()[-1]}") from None
  return model.getvalue()
