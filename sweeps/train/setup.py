"""Everything one run needs, built once before its first step: `build(c, workdir) -> Setup`.

In the order that fails before compute: the config checked (sweeps/train/config.py); the data opened,
its vocabulary checked against the model's; the mesh made over the run's devices and the
batch checked against it; the validation split checked against the eval tokens. Then the
optimizer and the step functions (`make_model`, also what `chinchax eval` rebuilds a run
with), the workdir's config.json, the state (the run's newest checkpoint that loads, else
`init_from`'s, else a fresh init), the metrics writer and one hook per feature the config
turns on (sweeps/train/hooks.py). A WSD branch is an ordinary run whose config sets `init_from`.
"""

import dataclasses
import os
from typing import Any, Callable

import jax
import ml_collections
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.models import sharding
from chinchax.models import sharding as mesh_lib
from chinchax.models.config import ModelConfig
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions
from chinchax.scaling.runs import records
from chinchax.sweeps import data
from chinchax.sweeps.chips import hardware
from chinchax.sweeps.train import checkpoint, metrics, optimizer
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import hooks as hooks_lib
from chinchax.sweeps.train import hooks as inputs_lib
from chinchax.sweeps.train import step as step_lib
from chinchax.sweeps.train import tasks as task_eval


@dataclasses.dataclass(frozen=True)
class Model:
  """A run's model and optimizer on its mesh; `abstract` is the state checkpoints restore onto."""

  cfg: ModelConfig
  opt_cfg: optimizer.OptimizerConfig
  lr: np.ndarray              # lr_t for t = 0 .. total_steps: an argument of the step
  tx: optax.GradientTransformation
  mesh: Mesh
  batch_sharding: NamedSharding
  abstract: Any
  train_step: Callable
  eval_step: Callable
  train_chunk: Callable       # up to `K` train steps in one dispatch (step.make_train_chunk)
  chunk_sharding: NamedSharding  # of the chunk's KxBxL batches
  K: int                      # train steps per dispatch (config.steps_per_dispatch)


def make_mesh(c: ml_collections.ConfigDict, devices=None) -> Mesh:
  return mesh_lib.make_mesh((c.mesh.data, c.mesh.fsdp, c.mesh.tensor), devices=devices)


def _mesh_key(c: ml_collections.ConfigDict, devices) -> tuple:
  ids = frozenset(d.id for d in (devices if devices is not None else jax.devices()))
  return ids, (c.mesh.data, c.mesh.fsdp, c.mesh.tensor)


@dataclasses.dataclass(frozen=True)
class Opened:
  """What a caller of many runs (a sweep) opened and checked once, for each run to reuse: the
  dataset, its vocabulary already checked against the model's, and the meshes it built over
  its device groups. A run whose config reads other data, or whose devices or mesh axes
  differ, opens and builds its own."""

  dataset: Any = None                       # a data.Dataset
  meshes: tuple[tuple[tuple, Mesh], ...] = ()  # ((key, mesh), ...) by `_mesh_key`

  @staticmethod
  def of(dataset, c: ml_collections.ConfigDict, device_groups) -> "Opened":
    return Opened(dataset, tuple((_mesh_key(c, g), make_mesh(c, g)) for g in device_groups))

  def dataset_for(self, c: ml_collections.ConfigDict):
    if self.dataset is None or run_config.uses_mixture(c):
      return None
    return data.with_config(self.dataset, run_config.data_config(c))

  def mesh_for(self, c: ml_collections.ConfigDict, devices) -> Mesh:
    return dict(self.meshes).get(_mesh_key(c, devices)) or make_mesh(c, devices)


def make_model(c: ml_collections.ConfigDict, model_cfg: ModelConfig, mesh: Mesh) -> Model:
  """The optimizer, its learning rates over the run's planned steps, and the jitted steps.

  The schedule stays out of the compiled step (sweeps/train/optimizer.py), so every run of one shape
  and batch shares one compile (the step functions are memoised on what they depend on).
  """
  rules, mode = sharding.RULES, c.sharding
  opt_cfg = run_config.optimizer_config(c)
  lr = optimizer.lr_table(opt_cfg, run_config.planned_steps(c))
  tx = optimizer.make(opt_cfg)
  abstract, _ = step_lib.state_shardings(model_cfg, tx, mesh, rules, mode)
  train_step = step_lib.make_train_step(model_cfg, tx, mesh, rules, mode,
                                        global_batch_size=c.batch_size, grad_accum=c.grad_accum)
  eval_step = step_lib.make_eval_step(model_cfg, tx, mesh, rules, mode)
  K = int(c.steps_per_dispatch)
  train_chunk = step_lib.make_train_chunk(model_cfg, tx, mesh, rules, mode, grad_accum=c.grad_accum,
                                          K=K)
  batch_sharding = sharding.batch_sharding(mesh, rules)
  return Model(model_cfg, opt_cfg, lr, tx, mesh, batch_sharding, abstract, train_step, eval_step,
               train_chunk, NamedSharding(mesh, PartitionSpec(None, *batch_sharding.spec)), K)


@dataclasses.dataclass(frozen=True)
class Setup:
  """What the loop reads: built once, never changed (the state and step evolve in the loop)."""

  c: ml_collections.ConfigDict
  workdir: str
  inputs: inputs_lib.Inputs
  batches: Any                # `hooks.Inputs`, or the seq-len warmup that cuts its rows
  model: Model
  total_steps: int
  tokens_per_step: int
  D: float                    # planned training tokens
  epochs: float               # of the planned D over the unique tokens
  flops_per_token: float      # 6N, for the logged FLOPs and MFU
  peak: float | None          # peak FLOP/s of a device (None: CPU)
  state: Any                  # restored or initialised
  step: int                   # of `state`
  ckpt: checkpoint.Checkpointer
  writer: metrics.MetricsWriter
  hooks: tuple[hooks_lib.Hook, ...]
  losses: tuple[float, ...]   # eval losses logged up to `step`
  train_loss: float           # the last one logged up to `step` (nan: none)
  clock: metrics.Clock         # seconds per phase, for the record's time_s

  def save(self, step: int, state, force: bool = False, steps: int = 1) -> None:
    # After each save the metrics are flushed: a resume drops the rows past its step, so
    # none up to it may be missing from metrics.jsonl (remote workdirs flush lazily).
    with self.clock("checkpoint"):
      if self.ckpt.maybe_save(step, state, force=force, steps=steps):
        self.writer.flush()

  def save_final(self, step: int, state) -> None:
    """The checkpoint where the steps ended, before the final eval and the record. A WSD branch
    (`branch_of`) saves none: once its record is written nobody reads it (a third of the smoke
    sweep's saves), and one killed before that resumes from its last interval checkpoint, or
    its branch point, and trains the rest again to the same bits."""
    if not self.c.branch_of:
      self.save(step, state, force=True)

  def mfu(self, tok_s: float | None) -> float | None:
    """Model FLOPs utilisation at `tok_s` tokens/s (None on CPU, which has no fair peak)."""
    if not (self.peak and tok_s):
      return None
    return tok_s * self.flops_per_token / (self.peak * self.model.mesh.size)


def build(c: ml_collections.ConfigDict, workdir: str, *, devices=None, checkpoint_lock=None,
          log=print, opened: Opened = Opened()) -> Setup:
  """Checks, opens and builds the run in `workdir` (see the module docstring).

  `devices`: the run's mesh (default all of the job's); `checkpoint_lock`: shared by runs in
  one process (the packed executor), whose checkpoints are then saved in turn, synchronously;
  `opened`: the data and meshes its caller opened and checked already.
  """
  run_config.check(c)
  total_steps = run_config.planned_steps(c)
  ds = opened.dataset_for(c)
  checked = ds is not None and not c.model.vocab_size  # the caller checked its vocabulary
  ds = ds or inputs_lib.open_data(c, total_steps)
  model_cfg = run_config.model_config(c, ds.vocab_size)
  if not checked:
    data.check_vocab(ds.tokenizer, model_cfg.shape.vocab_size)
  mesh = opened.mesh_for(c, devices)
  model_cfg.attention_kernel(mesh.devices.flat[0].platform)  # cudnn asked for where it can't run
  batch_sharding = sharding.batch_sharding(mesh, sharding.RULES)
  inputs = inputs_lib.make(c, ds, batch_sharding)
  prepared = task_eval.prepare(c, ds.tokenizer)  # a choice longer than seq_len: refused here
  tokens_per_step = c.batch_size * c.seq_len
  D = total_steps * tokens_per_step
  epochs = ds.epochs_for(D)
  if epochs > 4:
    log(f"warning: D={fmt.num(D)} tokens repeat the {fmt.num(ds.unique_tokens)} unique tokens "
        f"{epochs:.1f} times; repeats beyond ~4 epochs are worth much less than fresh data")
  model = make_model(c, model_cfg, mesh)

  clock = metrics.Clock()
  with clock("init"):
    ckpt, state, step, init_step = _restore(c, workdir, model, checkpoint_lock, log)
  inputs.resume(step)
  writer = metrics.MetricsWriter(workdir, resume_step=step)
  rows = records.read_metrics(writer.path)
  # A run resumed at its last step trains no more: its train loss is the one already logged.
  logged = [r["train_loss"] for r in rows if r.get("train_loss") is not None]
  batches, hooks = _hooks(c, workdir, inputs, model_cfg, init_step, checkpoint_lock)
  hooks += task_eval.hooks(prepared, model, writer, clock, tokens_per_step)
  return Setup(
      c=c, workdir=workdir, inputs=inputs, batches=batches, model=model,
      total_steps=total_steps, tokens_per_step=tokens_per_step, D=D, epochs=epochs,
      flops_per_token=conventions.flops_per_token(model_cfg.shape, "6ND"),
      peak=hardware.peak_flops(mesh.devices.flat[0]), state=state, step=step, ckpt=ckpt,
      writer=writer, hooks=hooks,
      losses=tuple(r["eval_loss"] for r in rows
                   if r.get("eval_loss") is not None and 0 < r["step"] <= step),
      train_loss=logged[-1] if logged else float("nan"), clock=clock)


def _restore(c, workdir: str, model: Model, lock, log):
  """(checkpointer, state, step, init_step): the newest checkpoint that loads, else a start."""
  atomic.makedirs(workdir)
  if jax.process_index() == 0:
    atomic.write_text(os.path.join(workdir, "config.json"), c.to_json_best_effort(indent=2))
  ckpt = checkpoint.Checkpointer(
      os.path.join(atomic.absolute(workdir), "checkpoints"), every_steps=c.checkpoint.every_steps,
      every_minutes=c.checkpoint.every_minutes, keep=c.checkpoint.keep,
      async_save=lock is None, lock=lock)
  state, step = ckpt.restore_latest(model.abstract)
  init_step = None
  if state is None and c.init_from:
    # A WSD cooldown branch starts from the stable run's state at its branch point.
    src = checkpoint.Checkpointer(c.init_from, async_save=False, lock=lock)
    state, step = src.restore_latest(model.abstract)
    src.close()
    if state is None:
      raise UserError(f"init_from={c.init_from!r} holds no checkpoint that loads")
    init_step = step
    log(f"started from {c.init_from} at step {step}")
  elif state is None:
    state = step_lib.init_train_state(model.cfg, model.tx, model.mesh, jax.random.key(c.seed),
                                      sharding.RULES, c.sharding)
  else:
    log(f"resumed from step {step}")
  return ckpt, state, step, init_step


def _hooks(c, workdir: str, inputs: inputs_lib.Inputs, model_cfg: ModelConfig,
           init_step: int | None, lock):
  """(the batches the loop reads, the hooks of the features the config turns on)."""
  out, batches = [], inputs
  if c.branch_of:
    out.append(hooks_lib.Lineage(c.branch_of, c.init_from, init_step))
  lengths = run_config.lengths(c)
  if len(lengths.stages) > 1:
    batches = hooks_lib.SeqLenWarmup(inputs, lengths, model_cfg.shape,
                                     c.batch_size * c.seq_len)
    out.append(batches)
  out.append(inputs)
  stopper = run_config.early_stopping(c)
  if stopper.enabled or c.checkpoint.keep_best:
    out.append(hooks_lib.BestCheckpoint(workdir, lock))
  if stopper.enabled:
    out.append(hooks_lib.EarlyStopping(stopper))
  if c.wsd.save_steps:
    out.append(hooks_lib.BranchPoints(workdir, c.wsd.save_steps, lock))
  return batches, tuple(out)
