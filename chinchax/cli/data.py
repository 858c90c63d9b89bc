"""`chinchax data`: prepare the data a sweep reads, without TensorFlow.

    chinchax data prepare --input=FILES[,FILES...] --name=NAME [--out=DATA_DIR]
        [--text_key=text] [--val_fraction=0.01] [--max_documents=N]
        [--tokenizer=spm|bytes] [--vocab=32000] [--model_type=bpe|unigram] [--spm_model=PATH]
    chinchax data tfds NAME [--out=DATA_DIR]

`prepare` turns raw text (jsonl, parquet or plain-text files, optionally .gz; local or gs://;
files, folders or globs) into the array_record dataset `chinchax_text/NAME` under DATA_DIR
(default $TFDS_DATA_DIR, else ~/.cache/chinchax/tfds), then trains a SentencePiece tokenizer
of `--vocab` pieces on its train split (or copies `--spm_model`, or none with
`--tokenizer=bytes`) into DATA_DIR/chinchax_tokenizers/NAME/. It prints the config overrides
that point a sweep at both. `tfds` prepares a TFDS catalogue dataset in array_record form
where its builder needs no TensorFlow (`sweeps/data/prepare.py` says which).
"""

import argparse
import os
import tempfile

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.cli import argtypes


def _parser() -> argparse.ArgumentParser:
  p = argtypes.Parser(prog="chinchax data", description=__doc__.splitlines()[0])
  sub = p.add_subparsers(dest="action", required=True, parser_class=argtypes.Parser)
  pr = sub.add_parser("prepare", help="raw text files -> chinchax_text/NAME (array_record)")
  pr.add_argument("--input", required=True, action="append",
                  help="files, folders or globs, local or gs:// (comma-separated, repeatable)")
  pr.add_argument("--name", required=True, help="the dataset's name: chinchax_text/NAME")
  pr.add_argument("--out", default=None, help="TFDS data dir (default: $TFDS_DATA_DIR)")
  pr.add_argument("--text_key", default="text", help="JSON field or parquet column")
  pr.add_argument("--val_fraction", type=float, default=0.01)
  pr.add_argument("--max_documents", type=int, default=None, help="stop after N documents")
  pr.add_argument("--tokenizer", default="spm", choices=("spm", "bytes"))
  pr.add_argument("--vocab", type=int, default=32000, help="SentencePiece pieces to train")
  pr.add_argument("--model_type", default="bpe", choices=("bpe", "unigram"))
  pr.add_argument("--spm_model", default=None, help="use this SentencePiece model instead")
  pr.add_argument("--max_sentences", type=int, default=2_000_000,
                  help="lines SentencePiece samples for training")
  tf = sub.add_parser("tfds", help="prepare a TFDS dataset in array_record form")
  tf.add_argument("name", help="a TFDS name, e.g. huggingface:wikitext/wikitext-103-raw-v1")
  tf.add_argument("--out", default=None, help="TFDS data dir (default: $TFDS_DATA_DIR)")
  return p


def _tokenizer(args, name: str, out: str) -> tuple[str | None, int]:
  """(the model's path, vocabulary) written under out/chinchax_tokenizers/NAME/."""
  from chinchax.sweeps.data import prepare, tokenizers  # pylint: disable=g-import-not-at-top
  if args.tokenizer == "bytes":
    return None, tokenizers.BytesTokenizer.vocab_size
  folder = os.path.join(out, "chinchax_tokenizers", args.name)
  path = os.path.join(folder, "spm.model")
  if args.spm_model:
    proto = atomic.read_bytes(args.spm_model)
    if proto is None:
      raise UserError(f"--spm_model={args.spm_model!r} does not exist")
  else:
    if args.vocab < 260:
      raise UserError(f"--vocab={args.vocab} is too small: 256 byte pieces and 3 specials "
                      "need at least 260")
    cache = tempfile.mkdtemp(prefix="chinchax-spm-")
    texts = (r["text"].decode("utf-8")
             for r in prepare.split_records(name, out, "train", cache))
    proto = tokenizers.train_sentencepiece(texts, args.vocab, args.model_type,
                                           args.max_sentences)
  atomic.write_bytes(path, proto)
  tok = tokenizers.SentencePieceTokenizer(path)
  atomic.write_json(os.path.join(folder, "tokenizer.json"), {
      "kind": "spm", "model": "spm.model", "name": tok.name, "vocab_size": tok.vocab_size,
      "eod_id": tok.eod_id, "pad_id": tok.pad_id, "tfds_name": name,
      "trained": not args.spm_model})
  return path, tok.vocab_size


def main(argv: list[str]) -> int:
  args = _parser().parse_args(argv)
  # Once the flags are read: TFDS and the pipeline (grain, jax) take 1.5 s to import, which
  # --help and a refused flag need not wait for.
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps import console  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.data import pipeline, prepare  # pylint: disable=g-import-not-at-top
  console.quiet_tfds()
  tfds.disable_progress_bar()
  out = pipeline.resolve_data_dir(args.out)
  atomic.check_backend(out, "--out")
  atomic.check_writable(out, "--out", folder=True)
  if args.action == "tfds":
    name = prepare.prepare_tfds(args.name, out)
    print(f"prepared {name} under {out}\nuse it with: --config.train.data.name={name} "
          f"--config.train.data.data_dir={out}")
    return 0
  inputs = [x for arg in args.input for x in arg.split(",") if x.strip()]
  name = prepare.prepare(inputs, out, args.name, args.text_key, args.val_fraction,
                         args.max_documents)
  model, vocab = _tokenizer(args, name, out)
  flags = [f"--config.train.data.name={name}", f"--config.train.data.data_dir={out}",
           f"--config.train.data.tokenizer={'spm' if model else 'bytes'}"]
  if model:
    flags.append(f"--config.train.data.spm_model={model}")
  flags.append(f"--config.vocab_size={vocab}")
  print(f"prepared {name} under {out}" + (f", tokenizer {model} ({vocab} pieces)" if model
                                           else ""))
  print("use it in a sweep with: " + " ".join(flags))
  return 0
