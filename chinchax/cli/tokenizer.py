"""`chinchax tokenizer`: train a SentencePiece model offline on a corpus's train split.

    chinchax tokenizer [--corpus=stdlib|DIR|GLOB] [--vocab=8192] --out=DIR
                       [--model_type=bpe|unigram] [--data_dir=DIR] [--val_fraction=0.05]

The corpus is built with the TFDS text builder first, so the tokenizer never sees the
validation documents. Writes `DIR/spm.model` and `DIR/tokenizer.json` (vocabulary, special ids,
the corpus's TFDS name and the measured UTF-8 bytes per token on the validation split). Use the
model with `DataConfig(tokenizer="spm", spm_model="DIR/spm.model")`.
"""

from chinchax import atomic
from chinchax.cli import flags
from chinchax.sweeps.data import text_builder, train_tokenizer


def _parser() -> flags.ArgParser:
  p = flags.ArgParser(prog="chinchax tokenizer", description=__doc__.splitlines()[0])
  p.add_argument("--corpus", default=text_builder.STDLIB,
                 help="'stdlib' (default), a directory or a glob of text files")
  p.add_argument("--vocab", type=int, default=8192, help="vocabulary size, specials included")
  p.add_argument("--out", required=True, help="output directory")
  p.add_argument("--model_type", default="bpe", choices=("bpe", "unigram"))
  p.add_argument("--data_dir", default=None,
                 help="TFDS data dir for the built corpus (default: $TFDS_DATA_DIR)")
  p.add_argument("--val_fraction", type=float, default=train_tokenizer.VAL_FRACTION)
  p.add_argument("--max_sentences", type=int, default=train_tokenizer.MAX_SENTENCES,
                 help="lines SentencePiece samples for training")
  return p


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)
  atomic.check_writable(args.out, "--out", folder=True)  # before the corpus is read
  info = train_tokenizer.train_tokenizer(
      args.corpus, args.vocab, args.out, model_type=args.model_type, data_dir=args.data_dir,
      val_fraction=args.val_fraction, max_sentences=args.max_sentences)
  print(f"wrote {info['path']}: vocab {info['vocab_size']}, "
        f"{info['validation_bytes_per_token']:.3f} bytes/token on the validation split of "
        f"{info['tfds_name']}")
  return 0
