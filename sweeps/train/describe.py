"""`chinchax train --dry-run`: a run's plan from its config alone.

Nothing is opened or written: the vocabulary is the tokenizer's (made from its name and model
file, without the corpus), and the checks that need the data (the vocabulary against the
model's, the unique tokens, the validation split) run when the run opens it.
"""

import ml_collections

from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions
from chinchax.sweeps.data import tokenizers
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import setup


def describe(c: ml_collections.ConfigDict, extra: tuple[str, ...] = ()) -> str:
  """The plan of the run `c` (checked as a run checks it before opening its data); `extra`:
  lines of what runs it (a WSD run's branches, from sweeps/wsd.py)."""
  run_config.check(c)
  tok = tokenizers.make_tokenizer(c.data.tokenizer, c.data.spm_model or None)
  shape = run_config.model_config(c, tok.vocab_size).shape
  mesh = setup.make_mesh(c)
  steps, tps = run_config.planned_steps(c), c.batch_size * c.seq_len
  counts = conventions.counts(shape, steps * tps)
  o = c.optimizer
  source = (f"mixture of {', '.join(c.data.mixture.sources)} ({c.data.mixture.kind})"
            if run_config.uses_mixture(c) else c.data.corpus or c.data.name)
  lines = [
      f"run {c.name!r}: {steps} steps of {c.batch_size} x {c.seq_len} tokens "
      f"(grad_accum {c.grad_accum}), D = {fmt.num(steps * tps, 4)} tokens",
      f"model: N = {counts['N_total']:,} ({counts['N_non_embedding']:,} non-embedding); "
      f"d_model {shape.d_model} x {shape.n_layers} layers, {shape.n_heads} heads, d_ff "
      f"{shape.d_ff}, vocab {shape.vocab_size}{', tied' if shape.tied else ''}; "
      f"{c.model.compute_dtype} compute",
      f"C = {fmt.num(counts['flops_6ND'], 4)} FLOPs (6ND), "
      f"{fmt.num(counts['flops_chinchilla'], 4)} (chinchilla)",
      f"optimizer: AdamW, {o.schedule} schedule, peak LR {fmt.num(o.peak_lr)} after "
      f"{o.warmup_steps} warmup steps, final {o.final_lr_ratio:g} x peak; weight decay "
      f"{o.weight_decay:g}, clip {o.clip_norm:g}",
      f"mesh {dict(mesh.shape)} over {mesh.size} {mesh.devices.flat[0].platform} device(s), "
      f"sharding {c.sharding}",
      f"data: {source}, {c.data.tokenizer} tokenizer; eval every {c.eval_every} steps over "
      f"{c.eval_tokens:,} tokens; checkpoints every {c.checkpoint.every_steps} steps or "
      f"{c.checkpoint.every_minutes:g} min",
  ]
  lengths = run_config.lengths(c)
  if len(lengths.stages) > 1:
    lines.append("sequence-length warmup: " + ", ".join(
        f"{L} from step {first}" for first, L in lengths.stages))
  if run_config.early_stopping(c).enabled:
    lines.append(f"early stop after {c.early_stop.patience} evals without a "
                 f"{c.early_stop.min_rel_improvement:.2%} improvement")
  lines += extra
  lines.append("the data is opened (and its vocabulary and unique tokens checked) when training")
  return "\n".join(lines)
