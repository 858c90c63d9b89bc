"""chinchax input pipeline: TFDS text corpora (array_record, no TensorFlow), tokenizers,
packing with a (seed, step)-addressable sample order, and multi-host batch assembly.

The names below are read from their modules on first use (PEP 562): the pipeline imports grain,
and grain imports jax, which a module of this package (a tokenizer's trainer, `chinchax data
--help`) should not pay for unless it reads batches."""

import importlib

_FROM = {
    "pipeline": ("DataConfig", "Dataset", "eval_batch", "eval_batches", "eval_bytes",
                 "n_eval_batches", "open_dataset", "open_split", "SPLITS", "train_batch",
                 "with_config"),
    "tokenizers": ("check_vocab", "make_tokenizer"),
    "multihost": ("check_batch", "global_batch", "global_chunk", "global_eval_batch"),
}
_MODULE = {name: module for module, names in _FROM.items() for name in names}
__all__ = sorted(_MODULE)


def __getattr__(name: str):
  if name not in _MODULE:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  value = getattr(importlib.import_module(f"{__name__}.{_MODULE[name]}"), name)
  globals()[name] = value  # once: later reads are plain attribute reads
  return value


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(__all__))
