"""One training run, end to end: the run every sweep cell executes.

    record = train(config, workdir)

reads top to bottom: the setup (sweeps/train/setup.py: checks that fail before compute, data, model,
restore) → steps (train, log, eval, checkpoint, stop) → the final eval → the run record
(`record_of`, written as result.json by scaling/runs/records.py). The training-craft features (mixtures, sequence-length warmup, early
stopping, the best checkpoint, WSD branch points) are hooks (sweeps/train/hooks.py) the loop calls at
fixed points; it has no feature flags of its own. Batch k is a function of (seed, k) alone and
the state holds the step, so a run resumed from a checkpoint continues the exact trajectory of
one never stopped.

Outputs in `workdir`: config.json, metrics.jsonl, tensorboard/, checkpoints/, result.json.
"""

import collections
import dataclasses
import math
import time

import jax
import ml_collections
import numpy as np

from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions
from chinchax.scaling.runs import records
from chinchax.sweeps.chips import hardware
from chinchax.sweeps.hosts import watch
from chinchax.sweeps.hosts import watchdog
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import metrics
from chinchax.sweeps.train import setup as setup_lib
from chinchax.sweeps.train import stop as stop_lib

# Train steps dispatched to the devices and not yet finished, at most. jax dispatches
# asynchronously: unbounded, the host ran hundreds of steps ahead of the devices between two
# log lines, and on CPU devices (a thread each, gloo across processes) that queue starved a
# device's thread past XLA's all-reduce rendezvous timeout or deadlocked the collectives of
# two processes (issue 40). Two keep the next step's dispatch overlapping the current one.
IN_FLIGHT = 2


@dataclasses.dataclass(frozen=True)
class End:
  """Where the steps ended."""

  state: object
  step: int
  train_loss: float          # the last one logged
  train_s: float             # seconds spent training (compile and evals excluded)
  losses: tuple[float, ...]  # every eval loss so far
  failure: str | None = None        # the run diverged
  stopped_early: int | None = None  # a hook stopped it at this step (early stopping)
  stopped_by: str | None = None     # a stop flag (SIGTERM, SIGINT) stopped it


def train(c: ml_collections.ConfigDict, workdir: str, *, stop=None, quiet: bool = False,
          devices=None, checkpoint_lock=None, progress=None,
          opened: setup_lib.Opened = setup_lib.Opened()) -> dict:
  """Trains (or resumes) the run in `workdir`; returns its record (also result.json).

  `devices`: the devices of this run's mesh (default: all of the job's), so that several
  small runs can share one host on disjoint device groups. `stop`: a flag object (see
  `stop_lib.StopFlag`); when it turns true the run saves a checkpoint and returns
  {"status": "stopped"}. Without one, SIGTERM and SIGINT set a flag of the run's own for the
  length of the loop. `checkpoint_lock`: see `setup.build`. `progress`: called as
  `progress(step, total_steps, tokens_per_s, train_loss)` at every log step (the sweep's
  progress line, sweeps/console.py). `opened`: see `setup.build`.
  """
  t_start = time.time()
  log = (lambda *_: None) if quiet else (lambda m: print(m, flush=True))
  run_config.check_resume(c, workdir)  # a finished or stopped run of another config: refused
  done = records.read_result(workdir)
  if done is not None and done.get("status") == "done":
    log(f"{workdir}: already done (eval loss {done['eval_loss']:.4f}); nothing to do")
    return done
  s = setup_lib.build(c, workdir, devices=devices, checkpoint_lock=checkpoint_lock, log=log,
                      opened=opened)
  own_stop = stop is None
  stop = stop_lib.StopFlag().install() if own_stop else stop
  try:
    end = steps(s, stop, log, progress)
  finally:
    if own_stop:
      stop.uninstall()
  if end.stopped_by:
    return stopped(s, end, log)
  return finish(s, end, t_start, log)


def steps(s: setup_lib.Setup, stop, log, progress=None) -> End:
  """Trains from the restored step to the last, or until a failure, a hook or `stop`, with a
  watchdog (sweeps/hosts/watchdog.py) that ends the process if no step finishes in time."""
  t = time.monotonic()
  train = compiled(s, s.state, s.step, log)
  dog = watchdog.Watchdog(s.step, time.monotonic() - t, jax.process_index(),
                          jax.process_count(), tell=watch.finish)
  try:
    return _steps(s, train, dog, stop, log, progress)
  finally:
    dog.close()


def _steps(s: setup_lib.Setup, train, dog: watchdog.Watchdog, stop, log, progress) -> End:
  c, state, step = s.c, s.state, s.step
  clock, guard = metrics.Throughput(step, s.tokens_per_step), SpikeGuard(c.spike_factor,
                                                            s.model.opt_cfg.warmup_steps)
  train_loss, losses = s.train_loss, list(s.losses)
  end = lambda **kw: End(state, step, train_loss, clock.train_s, tuple(losses), **kw)
  loop_start = s.clock.mark()
  in_flight = collections.deque()  # the losses of the dispatches not yet waited for
  while step < s.total_steps:
    last = chunk_end(s, step)  # the dispatch trains steps [step, last)
    for k in range(step, last):
      for h in s.hooks:
        h.before_step(k)
    state, m = train(state, step, last)
    n, step = last - step, last
    in_flight.append((step, m["loss"]))
    if len(in_flight) > IN_FLIGHT:
      done, loss = in_flight.popleft()
      jax.block_until_ready(loss)
      dog.progress(done)

    if step % c.log_every == 0 or step == s.total_steps:
      train_loss = float(m["loss"])  # a host sync, besides the run-ahead bound's
      dog.progress(step)
      failure = log_step(s, step, m, train_loss, clock, guard, log, progress)
      if failure:
        s.clock.rest("step", loop_start)
        return end(failure=failure)  # not checkpointed: the last good state stays the latest

    if step % c.eval_every == 0 and step < s.total_steps:
      jax.block_until_ready(state["params"])  # the steps before the eval count as training
      t_eval = time.time()
      with s.clock("eval"):
        losses.append(evaluate(s, step, state["params"]))
      dog.progress(step)
      reasons = [h.after_eval(step, state, losses) for h in s.hooks]
      if any(reasons):
        log(next(r for r in reasons if r))
        s.clock.rest("step", loop_start)
        return end(stopped_early=step)
      clock.pause(time.time() - t_eval)  # eval time is not training throughput

    for h in s.hooks:
      h.after_step(step, state)
    s.save(step, state, steps=n)
    reason = watch.stop_reason(stop)  # on several processes: the step they all stop at
    if reason:
      s.clock.rest("step", loop_start)
      return end(stopped_by=reason)
  s.clock.rest("step", loop_start)  # the loop's time outside data, eval and checkpoints
  return end()


def chunk_end(s: setup_lib.Setup, step: int) -> int:
  """Where a dispatch from `step` ends: K steps on (`steps_per_dispatch`), or sooner at a step
  the host must see: a log, eval or checkpoint step, a hook's (`must_see`), the last. A stop
  flag is read at each end, so a run stops at most K steps after the step the host had
  dispatched when the flag was set."""
  last = min(step + chunk_size(s), s.total_steps)
  for every in (s.c.log_every, s.c.eval_every, s.ckpt.every_steps):
    last = min(last, (step // every + 1) * every)
  seen = [k for h in s.hooks for k in h.must_see() if step < k < last]
  return min(seen, default=last)


def chunk_size(s: setup_lib.Setup) -> int:
  """K, or 1 while the batches change shape (sequence-length warmup: a program per length)."""
  return s.model.K if s.batches.fixed_shape else 1


def compiled(s: setup_lib.Setup, state, step: int, log):
  """`train(state, step, last) -> (state, metrics of step last - 1)`, which builds the batches
  of steps [step, last) and dispatches them as one program: the chunk's
  (step.make_train_chunk), or the one-step program when K = 1. The program is compiled ahead
  of the loop so that no tokens/s figure or time estimate includes it (batches whose shape
  changes compile on first use instead)."""
  K = chunk_size(s)

  def args(step: int, last: int) -> tuple:
    with s.clock("data"):
      if K == 1:
        return s.batches.batch(step), s.model.lr[step]
      lrs_K = np.zeros(K, np.float32)
      lrs_K[:last - step] = s.model.lr[step:last]
      return (s.batches.chunk(range(step, last), K, s.model.chunk_sharding), lrs_K,
              np.int32(last - step))

  program = s.model.train_step if K == 1 else s.model.train_chunk
  if step < s.total_steps and s.batches.fixed_shape:
    t = time.time()
    with s.clock("compile"):
      program = program.lower(state, *args(step, step + 1)).compile()
    log(f"compiled the train step in {time.time() - t:.1f} s; {s.total_steps} steps of "
        f"{s.c.batch_size} x {s.c.seq_len} tokens, "
        f"N={conventions.params(s.model.cfg.shape) / 1e6:.2f}M")
  return lambda state, step, last: program(state, *args(step, last))


def log_step(s: setup_lib.Setup, step: int, m, train_loss: float, clock: metrics.Throughput,
             guard: "SpikeGuard", log, progress=None) -> str | None:
  """Writes the metrics row of `step` and its progress line; returns a failure, if any."""
  tok_s = clock.lap(step)
  failure = guard.check(step, train_loss)
  tokens = step * s.tokens_per_step
  fields = {}
  for h in s.hooks:
    fields.update(h.log_fields(step))
  s.writer.write(
      step, tokens=tokens, flops=tokens * s.flops_per_token, train_loss=train_loss,
      lr=float(s.model.lr[step - 1]), grad_norm=float(m["grad_norm"]), tokens_per_s=tok_s,
      mfu=s.mfu(tok_s), epoch=tokens / s.inputs.ds.unique_tokens, **fields)
  left = (s.total_steps - step) * s.tokens_per_step / max(tok_s, 1e-9)
  log(f"step {step}/{s.total_steps} | loss {train_loss:.4f} | {tok_s / 1e3:.1f}k tok/s | "
      f"{fmt.clock(left)} left")
  if progress is not None:
    progress(step, s.total_steps, tok_s, train_loss)
  return failure


def evaluate(s: setup_lib.Setup, step: int, params) -> float:
  """The eval loss at `step`, written to the metrics."""
  loss, fields = s.inputs.evaluate(s.model.eval_step, params)
  s.writer.write(step, tokens=step * s.tokens_per_step, eval_loss=loss, **fields)
  return loss


def stopped(s: setup_lib.Setup, end: End, log) -> dict:
  """A stop flag ended the run: its state is saved where it stopped, to resume from."""
  s.save(end.step, end.state, force=True)
  s.ckpt.close()
  for h in s.hooks:
    h.close()
  s.writer.close()
  log(f"stopped by {end.stopped_by} at step {end.step}; checkpoint saved, rerun to resume")
  return {"status": "stopped", "step": end.step, "reason": end.stopped_by}


def finish(s: setup_lib.Setup, end: End, t_start: float, log) -> dict:
  """The last checkpoint and eval, then the run record (result.json)."""
  if not end.failure:
    s.save_final(end.step, end.state)
  s.ckpt.close()
  eval_loss = float("nan")
  if not end.failure:
    with s.clock("eval"):
      eval_loss = evaluate(s, end.step, end.state["params"])
    for h in s.hooks:
      h.after_final_eval(end.step, end.state, list(end.losses) + [eval_loss])
  for h in s.hooks:
    h.close()
  s.writer.close()
  record = record_of(s, end, eval_loss, wall_s=time.time() - t_start)
  if jax.process_index() == 0:
    records.write_result(s.workdir, record)
  if end.failure:
    log(f"failed: {end.failure}")
  else:
    bpb = record["eval_bpb"]
    bpb_text = f" ({bpb:.3f} bits/byte)" if bpb is not None else ""
    log(f"done: eval loss {eval_loss:.4f} nats/token{bpb_text}, "
        f"N={record['N_total'] / 1e6:.2f}M, D={record['D'] / 1e6:.2f}M tokens")
  return record


def _finite(x):
  return x if x is not None and math.isfinite(x) else None


def record_of(s: setup_lib.Setup, end: End, eval_loss: float, wall_s: float) -> dict:
  """The run's record (scaling/runs/records.py) from its setup, where its steps ended and the final
  eval's loss."""
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
  return records.make(
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


class SpikeGuard:
  """Fails a run whose loss is not finite, or (after warmup) jumps past `factor` × its
  running mean. The mean restarts on resume: it only guards, the trajectory itself is exact."""

  def __init__(self, factor: float, warmup_steps: int):
    self.factor, self.warmup_steps, self.running = factor, warmup_steps, None

  def check(self, step: int, loss: float) -> str | None:
    failure = None
    if not math.isfinite(loss):
      failure = f"non-finite training loss ({loss}) at step {step}"
    elif self.running is not None and step > self.warmup_steps and loss > self.factor * self.running:
      failure = (f"loss spike at step {step}: {loss:.4g} > {self.factor} × "
                 f"running mean {self.running:.4g}")
    self.running = loss if self.running is None else 0.9 * self.running + 0.1 * loss
    return failure
