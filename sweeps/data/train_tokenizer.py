"""A SentencePiece tokenizer trained offline on a corpus's train split (`chinchax tokenizer`).

The corpus is built with the TFDS text builder first, so the tokenizer never sees the
validation documents. Writes `OUT/spm.model` and `OUT/tokenizer.json` (vocabulary, special ids,
the corpus's TFDS name and the measured UTF-8 bytes per token on the validation split). Use the
model with `DataConfig(tokenizer="spm", spm_model="OUT/spm.model")`.
"""

import os

from chinchax import atomic
from chinchax.errors import UserError

MIN_VOCAB = 260  # 256 byte pieces and 3 specials, and one more
VAL_FRACTION = 0.05
MAX_SENTENCES = 2_000_000  # lines SentencePiece samples for training


def train_tokenizer(corpus: str, vocab: int, out: str, *, model_type: str = "bpe",
                    data_dir: str | None = None, val_fraction: float = VAL_FRACTION,
                    max_sentences: int = MAX_SENTENCES) -> dict:
  """Trains and writes the tokenizer; returns tokenizer.json's fields and its `path`."""
  if vocab < MIN_VOCAB:
    raise UserError(f"--vocab={vocab} is too small: 256 byte pieces and 3 specials "
                    f"need at least {MIN_VOCAB}")
  # Here, not at the top: `chinchax tokenizer --help` reads this module's defaults, and the
  # pipeline imports grain and jax (1.1 s), the builder TFDS.
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.data import pipeline, text_builder, tokenizers  # pylint: disable=g-import-not-at-top
  data_dir = pipeline.resolve_data_dir(data_dir)
  name = text_builder.build(corpus, data_dir, val_fraction)
  src = tfds.data_source(name, data_dir=data_dir)
  texts = (r["text"].decode("utf-8") for r in src["train"])
  proto = tokenizers.train_sentencepiece(texts, vocab, model_type, max_sentences)
  model_path = os.path.join(out, "spm.model")
  atomic.write_bytes(model_path, proto)
  tok = tokenizers.SentencePieceTokenizer(model_path)
  n_bytes = n_tokens = 0
  for r in src["validation"]:
    ids = tok.encode(r["text"].decode("utf-8"))
    n_bytes += int(tok.bytes_per_id[ids].sum())
    n_tokens += ids.shape[0]
  info = {"kind": "spm", "model": "spm.model", "name": tok.name, "vocab_size": tok.vocab_size,
          "eod_id": tok.eod_id, "pad_id": tok.pad_id, "model_type": model_type,
          "corpus": corpus, "tfds_name": name,
          "validation_bytes_per_token": n_bytes / max(n_tokens, 1)}
  atomic.write_json(os.path.join(out, "tokenizer.json"), info)
  return {**info, "path": model_path}
