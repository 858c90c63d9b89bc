"""A run's train config (sweeps/configs/train.py) resolved into what the code uses.

Every key a run reads is defined, with its one default, in sweeps/configs/train.py; a config
that lacks one (written by hand, or by an older chinchax) is refused here with the key named.
`check` refuses, before anything is opened or compiled, every value that cannot work (the
task files of `tasks` are read: a bad item is refused before the data is opened).
"""

import difflib
import json
import math
import os

import ml_collections

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.models import config
from chinchax.models import sharding
from chinchax.models.config import ModelConfig
from chinchax.scaling.runs import conventions
from chinchax import json_checks
from chinchax.sweeps import data
from chinchax.sweeps.configs import identity
from chinchax.sweeps.configs import keys
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.data import choices
from chinchax.sweeps.data import seqlen
from chinchax.sweeps.train import optimizer, stop

POSITIVE = ("seq_len", "batch_size", "tokens", "eval_every", "eval_tokens", "log_every",
            "grad_accum", "steps_per_dispatch")


def missing_keys(c: ml_collections.ConfigDict, reference: ml_collections.ConfigDict,
                 prefix: str = "") -> list[str]:
  """Keys of `reference` (dotted, recursively) that `c` lacks."""
  out = []
  for key, value in reference.items():
    if key not in c:
      out.append(prefix + key)
    elif isinstance(value, ml_collections.ConfigDict) and isinstance(
        c[key], ml_collections.ConfigDict):
      out += missing_keys(c[key], value, f"{prefix}{key}.")
  return out


def unknown_keys(c: ml_collections.ConfigDict, reference: ml_collections.ConfigDict,
                 prefix: str = "") -> list[str]:
  """Keys of `c` (dotted, recursively) that `reference` lacks: misspellings, mostly."""
  out = []
  for key, value in c.items():
    if key not in reference:
      near = difflib.get_close_matches(key, list(reference.keys()), n=1)
      out.append(prefix + key + (f" (did you mean {prefix + near[0]}?)" if near else ""))
    elif isinstance(value, ml_collections.ConfigDict) and isinstance(
        reference[key], ml_collections.ConfigDict):
      out += unknown_keys(value, reference[key], f"{prefix}{key}.")
  return out


def with_defaults(values: dict) -> ml_collections.ConfigDict:
  """The train config's defaults updated with `values` (e.g. a run's config.json)."""
  c = train_config.get_config()
  c.update(values)
  return c


def planned_steps(c: ml_collections.ConfigDict) -> int:
  return max(1, math.ceil(c.tokens / (c.batch_size * c.seq_len)))


def data_config(c: ml_collections.ConfigDict) -> data.DataConfig:
  d = c.data
  return data.DataConfig(
      name=d.name, corpus=d.corpus or None, data_dir=d.data_dir or None,
      text_key=d.text_key, tokenizer=d.tokenizer, spm_model=d.spm_model or None,
      seq_len=c.seq_len, batch_size=c.batch_size, seed=c.seed,
      # Caps the unique pool at the train stream's first U tokens, so sweeps can vary U.
      max_train_tokens=int(d.unique_tokens_cap) or None)


def model_config(c: ml_collections.ConfigDict, vocab_size: int) -> ModelConfig:
  """`vocab_size` is the tokenizer's; a nonzero `model.vocab_size` overrides it (then checked)."""
  m = c.model
  vocab_size = int(m.vocab_size or vocab_size)
  if m.N:
    shape = config.shape_for_params(int(m.N), vocab_size=vocab_size, seq_len=c.seq_len,
                                    tied=m.tied)
  else:
    shape = conventions.Shape(
        d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
        vocab_size=vocab_size, seq_len=c.seq_len, tied=m.tied)
  return ModelConfig(shape=shape, compute_dtype=m.compute_dtype, param_dtype=m.param_dtype,
                     remat=m.remat, z_loss=m.z_loss, attention=m.attention).validate()


def optimizer_config(c: ml_collections.ConfigDict) -> optimizer.OptimizerConfig:
  return optimizer.OptimizerConfig(**c.optimizer.to_dict())


def lengths(c: ml_collections.ConfigDict) -> seqlen.Schedule:
  """The sequence-length schedule (one stage when `seq_len_start` is 0)."""
  return seqlen.make(c.seq_len, c.seq_len_start, c.seq_len_warmup_fraction, planned_steps(c))


def early_stopping(c: ml_collections.ConfigDict) -> stop.EarlyStop:
  return stop.EarlyStop(int(c.early_stop.patience),
                              float(c.early_stop.min_rel_improvement))


def uses_mixture(c: ml_collections.ConfigDict) -> bool:
  return bool(c.data.mixture.sources)


def check(c: ml_collections.ConfigDict) -> None:
  """Refuses a train config that cannot run (UserError naming the key), before any I/O."""
  missing = missing_keys(c, train_config.get_config())
  if missing:
    raise UserError(f"the train config lacks {', '.join(missing)}; start it from "
                    "sweeps/configs/train.py's get_config()")
  unknown = unknown_keys(c, train_config.get_config())
  if unknown:
    raise UserError(f"the train config has no key {', '.join(unknown)}; check the spelling "
                    "against sweeps/configs/train.py")
  for key in POSITIVE:
    if not (json_checks.is_number(c[key]) and c[key] > 0):
      raise UserError(f"config.{key} must be positive, got {c[key]!r}")
  if int(c.steps_per_dispatch) != c.steps_per_dispatch:
    raise UserError(f"config.steps_per_dispatch must be a whole number of steps, got "
                    f"{c.steps_per_dispatch!r}")
  sharding.check_batch(c.batch_size, 1, c.grad_accum, hint="another config.grad_accum")
  _check_optimizer(c.optimizer)
  if not c.model.N:  # an explicit shape: heads must divide d_model (the recipe's always do)
    model_config(c, int(c.model.vocab_size) or 1)
  try:  # the schedule's own check, before any data is read
    optimizer.schedule(optimizer_config(c), planned_steps(c))
  except ValueError as e:
    raise UserError(f"config.optimizer: {e}") from None
  if c.sharding not in sharding.MODES:
    raise UserError(f"config.sharding={c.sharding!r} is not one of {', '.join(sharding.MODES)}")
  if c.model.vocab_size < 0:
    raise UserError(f"config.model.vocab_size={c.model.vocab_size} must be >= 0 "
                    "(0: the tokenizer's vocabulary)")
  lengths(c)
  early_stopping(c)
  choices.read_all(tuple(c.tasks) if isinstance(c.tasks, (list, tuple)) else c.tasks)


def _check_optimizer(o: ml_collections.ConfigDict) -> None:
  """Values no schedule or optax would refuse, yet that cannot train."""
  ranges = (("peak_lr", lambda x: x > 0, "a positive learning rate"),
            ("warmup_steps", lambda x: x >= 0, ">= 0"),
            ("final_lr_ratio", lambda x: 0 <= x <= 1, "in [0, 1]"),
            ("decay_fraction", lambda x: 0 < x <= 1, "in (0, 1]"),
            ("b1", lambda x: 0 <= x < 1, "in [0, 1)"),
            ("b2", lambda x: 0 <= x < 1, "in [0, 1)"),
            ("eps", lambda x: x > 0, "positive"),
            ("weight_decay", lambda x: x >= 0, ">= 0"),
            ("clip_norm", lambda x: x > 0, "positive"))
  for key, ok, words in ranges:
    x = o[key]
    if not (json_checks.is_number(x) and ok(x)):
      raise UserError(f"config.optimizer.{key} must be {words}, got {x!r}")


# What a sweep writes at its workdir's top (sweeps/sweep.py), which no run writes there.
SWEEP_FILES = ("sweep.json", "runs.jsonl")


def check_resume(c: ml_collections.ConfigDict, workdir: str) -> None:
  """Refuses to resume, or call finished, a run in `workdir` trained with a config that
  differs from `c` in a key that changes what it trains or measures (sweeps/configs/
  identity.py); a change of a free key (logging, checkpoints, the mesh) is allowed."""
  sweep = next((f for f in SWEEP_FILES if atomic.exists(os.path.join(workdir, f))), None)
  if sweep:
    raise UserError(f"{workdir} holds a sweep ({sweep}), another study: a run trains in a "
                    "folder of its own; pass another --workdir (a sweep's cell trains with "
                    "`chinchax train --config=SWEEP --cell=NAME`)")
  there = any(atomic.exists(os.path.join(workdir, f)) for f in ("result.json", "checkpoints"))
  old = identity.recorded(os.path.join(workdir, "config.json"), workdir, there)
  if old is None:
    return
  new = identity.flatten(json.loads(c.to_json_best_effort()))
  changed = identity.changes(old, new, identity.declared([("", train_config.KEYS)]))
  if changed[keys.IDENTITY]:
    raise UserError(f"{workdir} holds a run trained with another config: "
                    f"{identity.said(changed[keys.IDENTITY])}; a resume may change only "
                    "logging, checkpoint cadence and the mesh; pass another --workdir to train "
                    "this config")

