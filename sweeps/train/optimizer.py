"""The optimizer of every run: AdamW with a schedule whose length is the run's planned steps.

Hoffmann et al. (2022, App. B) found that a cosine cycle longer than the run leaves the model
under-trained at the end; every cell of a sweep therefore gets a schedule of exactly its own
`total_steps`: linear warmup to the peak, cosine decay to `final_lr_ratio` × peak (10%, as in
the paper) at the last step.

`wsd` is warmup–stable–decay (Hägele et al. 2024): warmup, a constant plateau, then a short
decay over the last `decay_fraction` of the steps; cooldown branches of one long run reuse the
plateau and add their own decay (`wsd_branch`).

Weight decay applies to matrices only (the last path key is not a norm `scale`).

The trainer keeps the schedule out of the compiled step: `make(cfg)` returns AdamW whose
`update(..., learning_rate=lr_t)` takes the step's learning rate as an argument, and the loop
reads lr_t from `lr_table(cfg, total_steps)`, so every run of one shape and batch (the cells of
a sweep at different budgets, a WSD run and its cooldown branches) shares one compiled step.
`make(cfg, lr)` bakes a schedule or a number in, as plain optax does.
"""

import dataclasses
import functools

import jax
import numpy as np
import optax


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  peak_lr: float = 3e-3
  warmup_steps: int = 100
  final_lr_ratio: float = 0.1
  schedule: str = "cosine"  # cosine | wsd | constant
  decay_fraction: float = 0.2  # wsd: fraction of the run spent in the final decay
  b1: float = 0.9
  b2: float = 0.95
  eps: float = 1e-8
  weight_decay: float = 0.1
  clip_norm: float = 1.0


def cosine(cfg: OptimizerConfig, total_steps: int) -> optax.Schedule:
  warmup = min(cfg.warmup_steps, max(total_steps - 1, 0))
  return optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=cfg.peak_lr, warmup_steps=warmup,
      decay_steps=total_steps, end_value=cfg.peak_lr * cfg.final_lr_ratio)


def wsd_branch(cfg: OptimizerConfig, decay_start: int, decay_steps: int) -> optax.Schedule:
  """Warmup, plateau until `decay_start`, then linear decay to the final LR over `decay_steps`."""
  warmup = min(cfg.warmup_steps, max(decay_start - 1, 0))
  return optax.join_schedules(
      [optax.linear_schedule(0.0, cfg.peak_lr, warmup),
       optax.constant_schedule(cfg.peak_lr),
       optax.linear_schedule(cfg.peak_lr, cfg.peak_lr * cfg.final_lr_ratio, decay_steps)],
      boundaries=[warmup, decay_start])


def schedule(cfg: OptimizerConfig, total_steps: int) -> optax.Schedule:
  if cfg.schedule == "cosine":
    return cosine(cfg, total_steps)
  if cfg.schedule == "wsd":
    decay = max(1, round(cfg.decay_fraction * total_steps))
    return wsd_branch(cfg, total_steps - decay, decay)
  if cfg.schedule == "constant":
    return optax.join_schedules(
        [optax.linear_schedule(0.0, cfg.peak_lr, cfg.warmup_steps),
         optax.constant_schedule(cfg.peak_lr)], [cfg.warmup_steps])
  raise ValueError(f"unknown schedule {cfg.schedule!r}: use cosine, wsd or constant")


def decay_mask(params):
  def is_matrix(path, _):
    last = path[-1]
    name = getattr(last, "key", getattr(last, "name", str(last)))
    return name != "scale"
  return jax.tree_util.tree_map_with_path(is_matrix, params)


# The schedule is evaluated on steps in blocks of this many: optax's schedules are eager jnp
# ops, each compiled for the shape it is given, so a table of every run's own length T + 1
# compiled about ten small XLA programs per run (305 of the smoke sweep's 341). Blocks of one
# length compile them once per process, whatever T; the values are the same ops on the same
# numbers, bit for bit (tests/sweeps/test_optimizer.py).
TABLE_BLOCK = 4096


def lr_table(cfg: OptimizerConfig, total_steps: int) -> np.ndarray:
  """lr_t for t = 0 .. total_steps (float32): the schedule evaluated once, read per step."""
  fn, n = schedule(cfg, total_steps), total_steps + 1
  blocks = [np.asarray(fn(np.arange(start, start + TABLE_BLOCK)), np.float32)
            for start in range(0, n, TABLE_BLOCK)]
  return np.concatenate(blocks)[:n]


def scale_by_injected_lr() -> optax.GradientTransformationExtraArgs:
  """updates · (−learning_rate), the learning rate an argument of `update`."""

  def update(updates, state, params=None, *, learning_rate, **extra):
    del params, extra
    return jax.tree.map(lambda u: -learning_rate * u, updates), state

  return optax.GradientTransformationExtraArgs(lambda _: optax.EmptyState(), update)


def make(cfg: OptimizerConfig, lr: optax.ScalarOrSchedule | None = None
         ) -> optax.GradientTransformation:
  """Clipped AdamW; `lr` None: the learning rate is given to each update (see above).

  With lr None the result depends only on the non-schedule fields and is memoised on them,
  so runs that differ in their schedule get the same object (and share compiled steps).
  """
  if lr is None:
    return _injected(cfg.b1, cfg.b2, cfg.eps, cfg.weight_decay, cfg.clip_norm)
  return optax.chain(
      optax.clip_by_global_norm(cfg.clip_norm),
      optax.adamw(lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay,
                  mask=decay_mask))


@functools.lru_cache(maxsize=None)
def _injected(b1, b2, eps, weight_decay, clip_norm) -> optax.GradientTransformationExtraArgs:
  # optax.adamw's own chain, with the learning rate taken from the update's arguments.
  return optax.chain(
      optax.clip_by_global_norm(clip_norm),
      optax.chain(optax.scale_by_adam(b1=b1, b2=b2, eps=eps),
                  optax.add_decayed_weights(weight_decay, decay_mask),
                  scale_by_injected_lr()))
