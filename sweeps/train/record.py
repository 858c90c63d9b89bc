"""The record of a finished run (schema and writer: sweeps/train/result.py), from its setup and
where its steps ended."""

import dataclasses
import math

from chinchax.sweeps.accel import hardware
from chinchax.sweeps.train import result as run_record


def _finite(x):
  return x if x is not None and math.isfinite(x) else None


def make(s, end, eval_loss: float, wall_s: float) -> dict:
  """`s`: the run's `setup.Setup`; `end`: its `loop.End`; `eval_loss`: the final eval's."""
  c, model, tps = s.c, s.model, s.tokens_per_step
  D = s.D if end.stopped_early is None else end.step * tps  # early stop: the tokens trained
  eval_bytes = s.inputs.eval_bytes()
  n_eval = max(s.inputs.n_eval.values())
  bpb = eval_loss * n_eval * tps / (math.log(2) * eval_bytes) if eval_bytes else None
  # Training throughput of this session: compile and eval time excluded.
  tok_s = (end.step - s.step) * tps / end.train_s if end.train_s > 0 else None
  fields = {}
  for h in s.hooks:
    fields.update(h.record_fields(end.step))
  return run_record.make(
      name=c.name, shape=model.cfg.shape, D=D, status="failed" if end.failure else "done",
      reason=end.failure, budget=c.budget or None, train_loss=_finite(end.train_loss),
      eval_loss=_finite(eval_loss), eval_bpb=_finite(bpb), steps=end.step,
      schedule=model.opt_cfg.schedule,
      hparams={"batch_size": c.batch_size, "seq_len": c.seq_len, "grad_accum": c.grad_accum,
               **dataclasses.asdict(model.opt_cfg), "seed": c.seed, "remat": model.cfg.remat,
               "compute_dtype": model.cfg.compute_dtype},
      unique_tokens=s.inputs.ds.unique_tokens, epochs=s.epochs, tokens_per_s=tok_s,
      mfu=s.mfu(tok_s),
      wall_s=wall_s, time_s=s.clock.seconds(wall_s), devices=model.mesh.size, mesh=dict(model.mesh.shape),
      hardware=hardware.record(model.mesh), **fields)
