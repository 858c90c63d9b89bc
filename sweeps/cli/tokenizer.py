"""`chinchax tokenizer`: train a SentencePiece model offline on a corpus's train split.

    chinchax tokenizer [--corpus=stdlib|DIR|GLOB] [--vocab=8192] --out=DIR
                       [--model_type=bpe|unigram] [--data_dir=DIR] [--val_fraction=0.05]

The corpus is built with the TFDS text builder first, so the tokenizer never sees the
validation documents. Writes `DIR/spm.model` and `DIR/tokenizer.json` (vocabulary, special ids,
the corpus's TFDS name and the measured UTF-8 bytes per token on the validation split). Use the
model with `DataConfig(tokenizer="spm", spm_model="DIR/spm.model")`.
"""

import argparse
import os

from chinchax.scaling import atomic
from chinchax.scaling.errors import UserError
from chinchax.sweeps.data import pipeline
from chinchax.sweeps.data import text_builder
from chinchax.sweeps.data import tokenizers


def _parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="chinchax tokenizer", description=__doc__.splitlines()[0])
  p.add_argument("--corpus", default=text_builder.STDLIB,
                 help="'stdlib' (default), a directory or a glob of text files")
  p.add_argument("--vocab", type=int, default=8192, help="vocabulary size, specials included")
  p.add_argument("--out", required=True, help="output directory")
  p.add_argument("--model_type", default="bpe", choices=("bpe", "unigram"))
  p.add_argument("--data_dir", default=None,
                 help="TFDS data dir for the built corpus (default: $TFDS_DATA_DIR)")
  p.add_argument("--val_fraction", type=float, default=0.05)
  p.add_argument("--max_sentences", type=int, default=2_000_000,
                 help="lines SentencePiece samples for training")
  return p


def main(argv: list[str]) -> int:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  args = _parser().parse_args(argv)
  if args.vocab < 260:
    raise UserError(f"--vocab={args.vocab} is too small: 256 byte pieces and 3 specials "
                    "need at least 260")
  data_dir = pipeline.resolve_data_dir(args.data_dir)
  name = text_builder.build(args.corpus, data_dir, args.val_fraction)
  src = tfds.data_source(name, data_dir=data_dir)
  texts = (r["text"].decode("utf-8") for r in src["train"])
  proto = tokenizers.train_sentencepiece(texts, args.vocab, args.model_type, args.max_sentences)
  model_path = os.path.join(args.out, "spm.model")
  atomic.write_bytes(model_path, proto)
  tok = tokenizers.SentencePieceTokenizer(model_path)
  n_bytes = n_tokens = 0
  for r in src["validation"]:
    ids = tok.encode(r["text"].decode("utf-8"))
    n_bytes += int(tok.bytes_per_id[ids].sum())
    n_tokens += ids.shape[0]
  atomic.write_json(os.path.join(args.out, "tokenizer.json"), {
      "kind": "spm", "model": "spm.model", "name": tok.name, "vocab_size": tok.vocab_size,
      "eod_id": tok.eod_id, "pad_id": tok.pad_id, "model_type": args.model_type,
      "corpus": args.corpus, "tfds_name": name,
      "validation_bytes_per_token": n_bytes / max(n_tokens, 1)})
  print(f"wrote {model_path}: vocab {tok.vocab_size}, "
        f"{n_bytes / max(n_tokens, 1):.3f} bytes/token on the validation split of {name}")
  return 0
