"""One training run, end to end: the run every sweep cell executes.

    chinchax train --config=sweeps/configs/train.py[:ARG] --workdir=DIR [--config.KEY=VALUE]

The loop reads top to bottom: config → checks that fail before compute → data → mesh, optimizer
and sharded state → restore → steps (log, eval, checkpoint, stop on preemption or divergence)
→ final eval → the run record. Batch k is a function of (seed, k) alone and the state holds the
step, so a run resumed from a checkpoint continues the exact trajectory of one never stopped.

Outputs in DIR: config.json, metrics.jsonl, tensorboard/, checkpoints/, result.json.
"""

import dataclasses
import json
import logging
import math
import os
import sys
import time

import jax
import ml_collections
import numpy as np

from chinchax.models import mesh as mesh_lib
from chinchax.models import shapes
from chinchax.models import sharding
from chinchax.models.config import ModelConfig
from chinchax.scaling import atomic, conventions
from chinchax.scaling.errors import UserError
from chinchax.sweeps import checkpoint, compile_cache, data, early_stop, hardware, metrics
from chinchax.sweeps import optimizer, run_record, timing
from chinchax.sweeps import step as step_lib
from chinchax.sweeps.data import mixture, seqlen

BEST_DIR = "checkpoints_best"  # the checkpoint of the lowest eval loss (keep_best / early_stop)
DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), "configs", "train.py")


# --------------------------------------------------------------------------- config


def data_config(c: ml_collections.ConfigDict) -> data.DataConfig:
  d = c.data
  return data.DataConfig(
      name=d.name, corpus=d.get("corpus") or None, data_dir=d.data_dir or None,
      text_key=d.text_key, tokenizer=d.tokenizer, spm_model=d.spm_model or None,
      seq_len=c.seq_len, batch_size=c.batch_size, seed=c.seed,
      # Caps the unique pool at the train stream's first U tokens, so sweeps can vary U.
      max_train_tokens=int(d.get("unique_tokens_cap", 0)) or None)


def model_config(c: ml_collections.ConfigDict, vocab_size: int) -> ModelConfig:
  """`vocab_size` is the tokenizer's; a nonzero `model.vocab_size` overrides it (then checked)."""
  m = c.model
  vocab_size = int(m.get("vocab_size", 0) or vocab_size)
  if m.N:
    shape = shapes.shape_for_params(int(m.N), vocab_size=vocab_size, seq_len=c.seq_len,
                                    tied=m.tied)
  else:
    shape = conventions.Shape(
        d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads, d_ff=m.d_ff,
        vocab_size=vocab_size, seq_len=c.seq_len, tied=m.tied)
  return ModelConfig(shape=shape, compute_dtype=m.compute_dtype, param_dtype=m.param_dtype,
                     remat=m.remat, z_loss=m.z_loss).validate()


def optimizer_config(c: ml_collections.ConfigDict) -> optimizer.OptimizerConfig:
  return optimizer.OptimizerConfig(**c.optimizer.to_dict())


def option(c: ml_collections.ConfigDict, path: str, default):
  """The config value at dotted `path`, or `default` when a (older) config lacks the key."""
  node = c
  for key in path.split("."):
    if not hasattr(node, "get") or key not in node:
      return default
    node = node[key]
  return node


def planned_steps(c: ml_collections.ConfigDict) -> int:
  return max(1, math.ceil(c.tokens / (c.batch_size * c.seq_len)))


def eval_loss_on(eval_step, params, ds: data.Dataset, n_eval: int, batch_sharding) -> float:
  """Token-weighted mean loss over the first `n_eval` eval batches of `ds`."""
  total, count = 0.0, 0.0
  for k in range(n_eval):
    m = eval_step(params, data.global_eval_batch(ds, k, batch_sharding))
    total, count = total + float(m["loss_sum"]), count + float(m["tokens"])
  return total / count


def check_config(c: ml_collections.ConfigDict) -> None:
  for key in ("seq_len", "batch_size", "tokens", "eval_every", "eval_tokens", "log_every",
              "grad_accum"):
    if not c[key] > 0:
      raise UserError(f"config.{key} must be positive, got {c[key]}")
  if c.batch_size % c.grad_accum:
    raise UserError(f"config.batch_size={c.batch_size} is not divisible by "
                    f"config.grad_accum={c.grad_accum}")
  try:  # the schedule's own check, before any data is read
    optimizer.schedule(optimizer_config(c), planned_steps(c))
  except ValueError as e:
    raise UserError(f"config.optimizer: {e}") from None
  if c.sharding not in sharding.MODES:
    raise UserError(f"config.sharding={c.sharding!r} is not one of {', '.join(sharding.MODES)}")
  if c.model.get("vocab_size", 0) < 0:
    raise UserError(f"config.model.vocab_size={c.model.vocab_size} must be >= 0 "
                    "(0: the tokenizer's vocabulary)")


# --------------------------------------------------------------------------- the run


def train(c: ml_collections.ConfigDict, workdir: str, *, stop=None, quiet=False,
          devices=None) -> dict:
  """Trains (or resumes) the run in `workdir`; returns its record (also result.json).

  `devices`: the devices of this run's mesh (default: all of the job's), so that several
  small runs can share one host on disjoint device groups. `stop`: a flag object (see
  `checkpoint.StopFlag`); when it turns true the run saves a checkpoint and returns
  {"status": "stopped"}. Without one, SIGTERM and SIGINT set a flag of the run's own for the
  length of the loop.
  """
  t_start, clock = time.time(), timing.Clock()
  log = (lambda *_: None) if quiet else (lambda m: print(m, flush=True))
  done = run_record.read_result(workdir)
  if done is not None and done.get("status") == "done":
    log(f"{workdir}: already done (eval loss {done['eval_loss']:.4f}); nothing to do")
    return done

  # ---- Fail before compute: config, data, vocabulary, mesh and batch are checked first.
  check_config(c)
  mix = option(c, "data.mixture", None)
  use_mix = bool(mix is not None and mix.get("sources"))
  if use_mix:  # a curriculum over several sources (sweeps/data/mixture.py)
    ds = mixture.open_mixture(
        data_config(c), tuple(mix.sources),
        mixture.Curriculum(tuple(tuple(float(x) for x in w) for w in mix.weights), mix.kind,
                           tuple(float(t) for t in mix.boundaries)),
        planned_steps(c))
  else:
    ds = data.open_dataset(data_config(c))
  model_cfg = model_config(c, ds.vocab_size)
  data.check_vocab(ds.tokenizer, model_cfg.shape.vocab_size)
  mesh = mesh_lib.make_mesh((c.mesh.data, c.mesh.fsdp, c.mesh.tensor), devices=devices)
  rules, mode = sharding.RULES, c.sharding
  batch_sharding = sharding.batch_sharding(mesh, rules)
  data.check_batch(c.batch_size, batch_sharding, c.seq_len)
  for source in (ds.sources if use_mix else (ds,)):  # eval fits in each validation split
    data.n_eval_batches(source, c.eval_tokens)
  total_steps = planned_steps(c)
  tokens_per_step = c.batch_size * c.seq_len
  D = total_steps * tokens_per_step
  shape = model_cfg.shape
  flops_per_token = conventions.flops_per_token(shape, "6ND")
  epochs = ds.epochs_for(D)
  if epochs > 4:
    log(f"warning: D={D:.3g} tokens repeat the {ds.unique_tokens:.3g} unique tokens "
        f"{epochs:.1f} times; repeats beyond ~4 epochs are worth much less than fresh data")

  # ---- Mesh, optimizer, state.
  opt_cfg = optimizer_config(c)
  lr = optimizer.lr_table(opt_cfg, total_steps)  # read per step: not part of the compiled step
  tx = optimizer.make(opt_cfg)
  abstract, _ = step_lib.state_shardings(model_cfg, tx, mesh, rules, mode)
  train_step = step_lib.make_train_step(model_cfg, tx, mesh, rules, mode,
                                        global_batch_size=c.batch_size, grad_accum=c.grad_accum)
  eval_step = step_lib.make_eval_step(model_cfg, tx, mesh, rules, mode)

  # ---- Restore: the newest checkpoint that loads, else start fresh.
  atomic.makedirs(workdir)
  if jax.process_index() == 0:
    atomic.write_text(os.path.join(workdir, "config.json"), c.to_json_best_effort(indent=2))
  ckpt = checkpoint.Checkpointer(
      os.path.join(atomic.absolute(workdir), "checkpoints"), every_steps=c.checkpoint.every_steps,
      every_minutes=c.checkpoint.every_minutes, keep=c.checkpoint.keep)
  with clock("init"):
    state, step = ckpt.restore_latest(abstract)
  init_from, init_step = option(c, "init_from", ""), None
  if state is None and init_from:
    # A WSD cooldown branch starts from the stable run's state at its branch point.
    src = checkpoint.Checkpointer(init_from, async_save=False)
    with clock("init"):
      state, step = src.restore_latest(abstract)
    src.close()
    if state is None:
      raise UserError(f"init_from={init_from!r} holds no checkpoint that loads")
    init_step = step
    log(f"started from {init_from} at step {step}")
  elif state is None:
    with clock("init"):
      state = step_lib.init_train_state(model_cfg, tx, mesh, jax.random.key(c.seed), rules, mode)
  else:
    log(f"resumed from step {step}")
  start_step = step
  writer = metrics.MetricsWriter(workdir, resume_step=step)

  def save(step: int, state, force: bool = False) -> None:
    # After each save the metrics are flushed: a resume drops the rows past its step, so
    # none up to it may be missing from metrics.jsonl (remote workdirs flush lazily).
    with clock("checkpoint"):
      if ckpt.maybe_save(step, state, force=force):
        writer.flush()

  # A run resumed at its last step trains no more: its train loss is the one already logged.
  logged = [r["train_loss"] for r in metrics.read(writer.path) if r.get("train_loss") is not None]
  train_loss = logged[-1] if logged else float("nan")
  eval_sets = dict(zip(ds.names, ds.sources)) if use_mix else {"": ds}
  n_evals = {k: data.n_eval_batches(d, c.eval_tokens) for k, d in eval_sets.items()}
  n_eval = max(n_evals.values())
  by_source = {}  # the last eval's loss per mixture source
  # Early stopping and the best checkpoint decide from the eval history, which metrics.jsonl
  # holds up to the restored step: a resumed run decides as one never stopped.
  stopper = early_stop.EarlyStop(int(option(c, "early_stop.patience", 0)),
                                 float(option(c, "early_stop.min_rel_improvement", 0.0)))
  history = [r["eval_loss"] for r in metrics.read(writer.path)
             if r.get("eval_loss") is not None and 0 < r["step"] <= step]
  best_ckpt = (checkpoint.Checkpointer(os.path.join(atomic.absolute(workdir), BEST_DIR),
                                       every_steps=10**12, every_minutes=0, keep=1)
               if stopper.enabled or option(c, "checkpoint.keep_best", False) else None)

  def evaluate(params) -> float:
    losses = {k: eval_loss_on(eval_step, params, d, n_evals[k], batch_sharding)
              for k, d in eval_sets.items()}
    if not use_mix:
      return losses[""]
    by_source.update(losses)
    return float(np.dot(ds.eval_weights(), [losses[k] for k in ds.names]))

  def source_fields() -> dict:
    return {"eval_loss_by_source": dict(by_source)} if use_mix else {}

  # ---- Steps.
  # Sequence-length warmup (sweeps/data/seqlen.py): same tokens per step, shorter rows early.
  lengths = seqlen.make(c.seq_len, int(option(c, "seq_len_start", 0)),
                        float(option(c, "seq_len_warmup_fraction", 0.1)), total_steps)
  warm_lengths = len(lengths.stages) > 1
  # Per-source tokens so far, replayed from (seed, step): a resumed run continues the counts.
  source_tokens = mixture.tokens_until(ds, step) if use_mix else None
  save_steps = set(option(c, "wsd.save_steps", ()))

  def batch_at(k: int):
    if warm_lengths or use_mix:
      return seqlen.global_batch(ds, k, batch_sharding, lengths.length_at(k),
                                 mixture.train_batch if use_mix else data.train_batch)
    return data.global_batch(ds, k, batch_sharding)

  # Compiled ahead of the loop so that no tokens/s figure or time estimate includes it (with
  # sequence-length warmup each length compiles on first use instead).
  if step < total_steps and not warm_lengths:
    t = time.time()
    with clock("compile"):
      train_step = train_step.lower(state, batch_at(step), lr[step]).compile()
    log(f"compiled the train step in {time.time() - t:.1f} s; {total_steps} steps of "
        f"{c.batch_size} x {c.seq_len} tokens, N={conventions.params(shape) / 1e6:.2f}M")

  own_stop = stop is None
  stop = checkpoint.StopFlag().install() if own_stop else stop
  peak = hardware.peak_flops(mesh.devices.flat[0])
  t_last, step_last, train_s, running, failure = time.time(), step, 0.0, None, None
  stopped_early = None
  loop_start = clock.mark()
  try:
    while step < total_steps:
      with clock("data"):
        batch = batch_at(step)
      if use_mix:
        source_tokens += np.bincount(mixture.choices(ds, step),
                                     minlength=len(ds.sources)) * c.seq_len
      state, m = train_step(state, batch, lr[step])
      step += 1

      if step % c.log_every == 0 or step == total_steps:
        train_loss = float(m["loss"])  # the only host sync in the loop
        now = time.time()
        tok_s = (step - step_last) * tokens_per_step / max(now - t_last, 1e-9)
        train_s += now - t_last
        t_last, step_last = now, step
        if not math.isfinite(train_loss):
          failure = f"non-finite training loss ({train_loss}) at step {step}"
        elif (running is not None and step > opt_cfg.warmup_steps
              and train_loss > c.spike_factor * running):
          failure = (f"loss spike at step {step}: {train_loss:.4g} > {c.spike_factor} × "
                     f"running mean {running:.4g}")
        # The running mean restarts on resume: it only guards against spikes, the trajectory
        # itself is exact.
        running = train_loss if running is None else 0.9 * running + 0.1 * train_loss
        writer.write(
            step, tokens=step * tokens_per_step,
            flops=step * tokens_per_step * flops_per_token, train_loss=train_loss,
            lr=float(lr[step - 1]), grad_norm=float(m["grad_norm"]), tokens_per_s=tok_s,
            mfu=(tok_s * flops_per_token / (peak * mesh.size)) if peak else None,
            epoch=step * tokens_per_step / ds.unique_tokens,
            **({"seq_len": lengths.length_at(step - 1),
                "flops_chinchilla": seqlen.flops_until(lengths, shape, step, tokens_per_step)}
               if warm_lengths else {}),
            **({"tokens_by_source": dict(zip(ds.names, source_tokens.tolist())),
                "mixture_weights": ds.curriculum.weights_at(step / total_steps).tolist()}
               if use_mix else {}))
        log(f"step {step}/{total_steps} | loss {train_loss:.4f} | {tok_s / 1e3:.1f}k tok/s | "
            f"{_clock((total_steps - step) * tokens_per_step / max(tok_s, 1e-9))} left")
        if failure:
          break  # the diverged state is not checkpointed: the last good one stays the latest

      if step % c.eval_every == 0 and step < total_steps:
        jax.block_until_ready(state["params"])  # the steps before the eval count as training
        t_eval = time.time()
        with clock("eval"):
          eval_loss = evaluate(state["params"])
        writer.write(step, tokens=step * tokens_per_step, eval_loss=eval_loss, **source_fields())
        history.append(eval_loss)
        if best_ckpt is not None and early_stop.is_best(history):
          best_ckpt.maybe_save(step, state, force=True)
        if stopper.should_stop(history):
          stopped_early = step
          log(f"early stop at step {step}: no {stopper.min_rel_improvement:.2%} improvement in "
              f"the last {stopper.patience} evals (best {min(history):.4f})")
          break
        t_last += time.time() - t_eval  # eval time is not training throughput

      if step in save_steps:
        _save_branch_point(workdir, step, state)
      save(step, state)
      if stop:
        save(step, state, force=True)
        ckpt.close()
        if best_ckpt is not None:
          best_ckpt.close()
        writer.close()
        log(f"stopped by {stop.reason} at step {step}; checkpoint saved, rerun to resume")
        return {"status": "stopped", "step": step, "reason": stop.reason}
  finally:
    clock.rest("step", loop_start)  # the loop's time outside data, eval and checkpoints
    if own_stop:
      stop.uninstall()

  # ---- Final eval and the run record.
  if not failure:
    save(step, state, force=True)
  ckpt.close()
  with clock("eval"):
    eval_loss = float("nan") if failure else evaluate(state["params"])
  if not failure:
    writer.write(step, tokens=step * tokens_per_step, eval_loss=eval_loss, **source_fields())
    if best_ckpt is not None and stopped_early is None and early_stop.is_best(history + [eval_loss]):
      best_ckpt.maybe_save(step, state, force=True)
  if best_ckpt is not None:
    best_ckpt.close()
  writer.close()
  wall = time.time() - t_start
  if stopped_early is not None:
    D = step * tokens_per_step  # the tokens actually trained
  eval_bytes = None if use_mix else data.eval_bytes(ds, n_eval * tokens_per_step)
  bpb = eval_loss * n_eval * tokens_per_step / (math.log(2) * eval_bytes) if eval_bytes else None
  # Training throughput of this session: compile and eval time excluded.
  tok_s = (step - start_step) * tokens_per_step / train_s if train_s > 0 else None
  record = run_record.make(
      name=c.name, shape=shape, D=D, status="failed" if failure else "done", reason=failure,
      budget=c.budget or None, train_loss=_finite(train_loss), eval_loss=_finite(eval_loss),
      eval_bpb=_finite(bpb), steps=step, schedule=opt_cfg.schedule,
      hparams={"batch_size": c.batch_size, "seq_len": c.seq_len, "grad_accum": c.grad_accum,
               **dataclasses.asdict(opt_cfg), "seed": c.seed, "remat": model_cfg.remat,
               "compute_dtype": model_cfg.compute_dtype},
      unique_tokens=ds.unique_tokens, epochs=epochs, tokens_per_s=tok_s,
      mfu=(tok_s * flops_per_token / (peak * mesh.size)) if peak and tok_s else None,
      wall_s=wall, time_s=clock.seconds(wall), devices=mesh.size, mesh=dict(mesh.shape),
      **_lineage(c, init_step),
      **({"flops_chinchilla": seqlen.flops_until(lengths, shape, step, tokens_per_step),
          "seq_len_stages": [list(s) for s in lengths.stages]} if warm_lengths else {}),
      **({"mixture": {"sources": list(ds.names), "kind": ds.curriculum.kind,
                      "tokens_by_source": dict(zip(ds.names, source_tokens.tolist())),
                      "eval_loss_by_source": dict(by_source)}} if use_mix else {}),
      **({"early_stopped": stopped_early, "best_eval_loss": min(history)}
         if stopped_early is not None else {}))
  if jax.process_index() == 0:
    run_record.write_result(workdir, record)
  if failure:
    log(f"failed: {failure}")
  else:
    bpb_text = f" ({bpb:.3f} bits/byte)" if bpb is not None else ""
    log(f"done: eval loss {eval_loss:.4f} nats/token{bpb_text}, "
        f"N={record['N_total'] / 1e6:.2f}M, D={D / 1e6:.2f}M tokens")
  return record


def _clock(seconds: float) -> str:
  s = int(seconds)
  return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _save_branch_point(workdir: str, step: int, state) -> None:
  from chinchax.sweeps import wsd  # pylint: disable=g-import-not-at-top
  points = checkpoint.Checkpointer(wsd.branch_points_dir(workdir, step), keep=1)
  points.maybe_save(step, state, force=True)
  points.close()


def _lineage(c: ml_collections.ConfigDict, init_step: int | None) -> dict:
  """Record fields of a run that continues another (a WSD branch); none otherwise."""
  branch_of = option(c, "branch_of", "")
  if not branch_of:
    return {}
  init_from = option(c, "init_from", "")
  if init_step is None and atomic.isdir(init_from):  # a resumed branch: read its start back
    steps = [int(d) for d in atomic.listdir(init_from) if d.isdigit()]
    init_step = max(steps) if steps else None
  return {"branch_of": branch_of, "init_from": init_from, "init_step": init_step}


def _finite(x):
  return x if x is not None and math.isfinite(x) else None


# --------------------------------------------------------------------------- CLI


def parse_flags(argv: list[str], prog: str, default_config: str,
                default_workdir: str | None = None):
  """absl flags with an ml_collections config file, parsed into a private FlagValues.

  The `--config.KEY=VALUE` overrides are read from `argv` itself (ml_collections would read
  them from sys.argv), so the parse is the same in-process as from the command line.
  """
  from absl import flags
  from ml_collections import config_flags

  args = [prog] + list(argv)
  fv = flags.FlagValues()
  flags.DEFINE_string("workdir", default_workdir, "run directory", flag_values=fv)
  flags.DEFINE_boolean("dry_run", False, "print the plan and exit", flag_values=fv)
  flags.DEFINE_boolean("quiet", False, "no progress lines", flag_values=fv)
  try:
    # Inside the try: the default config file is loaded, with the overrides, right here.
    config_flags.DEFINE_config_file("config", default=default_config, flag_values=fv,
                                    lock_config=True, sys_argv=args,
                                    help_string="config file[:ARG]")
    fv(args)
    config = fv.config
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError, OSError) as e:
    raise UserError(_flag_error(e, argv)) from None
  if fv.workdir:
    atomic.check_backend(fv.workdir)  # gs:// without gcsfs: refused before anything compiles
  return fv, config


def _flag_error(e: Exception, argv: list[str]) -> str:
  """One line for a bad flag: the offending flag and the innermost cause."""
  if isinstance(e, (KeyError, AttributeError)) and e.args:
    # An override of a key the config does not have: ml_collections says only the key.
    key = str(e.args[0]).strip("'\"")
    flag = next((a.split("=")[0] for a in argv
                 if a.startswith("--config.") and key in a.split("=")[0].split(".")), None)
    if flag:
      return f"{flag}: the config has no key {key!r}; check the spelling against the config file"
  lines = [line.strip() for line in str(e).splitlines() if line.strip()]
  if not lines:
    return type(e).__name__
  if len(lines) == 1:
    return lines[0]
  # A config file that failed to load or raised: the first line names the flag, the last
  # holds the cause (the rest is a traceback).
  return f"{lines[0].rstrip(':')}: {lines[-1]}"


def _no_custom_config_notice(record: logging.LogRecord) -> bool:
  # TFDS announces every chinchax corpus as a "custom data configuration": noise, not news.
  return not str(record.msg).startswith("Using custom data configuration")


def main(argv: list[str]) -> int:
  logging.getLogger("absl").addFilter(_no_custom_config_notice)  # idempotent
  compile_cache.enable()
  fv, c = parse_flags(argv, "chinchax train", DEFAULT_CONFIG)
  if not fv.workdir:
    raise UserError("--workdir is required: the folder for checkpoints, metrics and result.json")
  if option(c, "wsd.branches", ()):
    from chinchax.sweeps import wsd  # pylint: disable=g-import-not-at-top
    record = wsd.train_wsd(c, fv.workdir, quiet=fv.quiet)
    for b in record["branches"]:
      if b.get("status") == "failed":
        record = b
  else:
    record = train(c, fv.workdir, quiet=fv.quiet)
  if record.get("status") == "stopped":
    return 143
  if record.get("status") == "failed":
    print(json.dumps({"status": "failed", "reason": record["reason"]}), file=sys.stderr)
    return 1
  return 0
