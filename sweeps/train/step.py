"""One sharded training step, and a train state initialised on its shards.

The train state is a plain pytree `{"params", "opt_state", "step"}`. Its shardings come from
the model's logical axis names through `models.sharding.RULES`: `jax.eval_shape` of the
boxed initialiser gives every leaf (optimizer state included, since optax maps over the
boxed parameters) its logical names without allocating anything; `init_train_state` then
jits the initialiser with those out_shardings, so no host ever holds a full copy. On an
accelerator a state up to 1 GiB (`HOST_INIT_MAX_BYTES`, one process) is made by the host's
CPU and copied onto its shards instead: there the init's random-number kernels cost as much
to compile as the train step, for a program that runs once.

`make_train_step` returns one `jax.jit` with explicit in/out shardings and the state donated:

    (loss, metrics), g = value_and_grad(loss_fn)(params, batch)      # bf16/f32 compute
    updates, opt_state = optimizer.update(g, opt_state, params, learning_rate=lr)
    params             = params + updates

The learning rate is an argument of the step (`optimizer.make(cfg)` reads it from `update`;
an optax transformation with its own schedule ignores it), so the schedule is not part of the
compiled program. The jitted init, train and eval steps are memoised on what they depend on
(model config, optimizer, mesh, rules, mode, microbatches): the cells of a sweep and the
branches of a WSD run with the same shape and batch trace and compile them once per process,
and `compile_cache.enable` keeps the executables on disk for the next process.

Everything that cannot work (mesh, rules, shape, divisibility, batch) is refused with a
`UserError` before anything is traced or compiled.
"""

import dataclasses
import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from chinchax.models import decoder, sharding
from chinchax.models.config import ModelConfig
from chinchax.models.sharding import Rules

State = dict[str, Any]

INIT_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0}  # see `_init_fn`
# A state up to this size is initialised by the host's CPU on an accelerator (`_init_fn`). On
# one H200 (bench/init_bench.py: cold cache, 16 CPU cores; recipe shapes, f32 parameters and
# AdamW) the first call of the init took, on the GPU against on the CPU and then put on the
# GPU: 2.1M parameters 5.5 s against 1.2 s, 5.9M 5.0 against 2.0, 20M 10.3 against 2.4, 50M
# 18.6 against 5.0, 151M (a 1.8 GB state; in another process, after a 50M init) 3.4 against
# 4.0. The smoke sweep's 9 inits compiled in 34.8 s on the GPU, as long as its 9 train
# chunks, and in 8.0 s on the CPU (the sweep: 142 s -> 129 s).
HOST_INIT_MAX_BYTES = 1 << 30
# Above this many elements the host's init is compiled with optimisation: unoptimised, its
# kernels run about 5x slower (50M: 2.9 s against 0.5 s on a 2-core CPU), more than the
# compile saves.
HOST_INIT_UNOPTIMISED_MAX = 1 << 24


def _boxed_state(cfg: ModelConfig, optimizer: optax.GradientTransformation, rng) -> State:
  params = decoder.init_params(cfg, rng)
  return {"params": params, "opt_state": optimizer.init(params),
          "step": jnp.zeros((), jnp.int32)}


def state_shardings(
    cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
    rules: Rules = sharding.RULES, mode: str = "fsdp",
) -> tuple[State, State]:
  """(abstract state of ShapeDtypeStructs carrying shardings, the NamedSharding tree).

  The abstract state is the `target` to restore a checkpoint onto this mesh. Memoised: a run
  asks for it from its init, train step and eval step, and each answer traces the model once.
  The trees are shared between callers: read them, do not modify them.
  """
  return _state_shardings(cfg, optimizer, mesh, _hashable(rules), mode)


@functools.lru_cache(maxsize=16)
def _state_shardings(cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
                     rules: Rules, mode: str) -> tuple[State, State]:
  cfg.validate()
  sharding.validate_rules(rules, mesh)
  p_rules = sharding.param_rules(rules, mode)
  params = _boxed_params(cfg)
  boxed = {"params": params, "opt_state": jax.eval_shape(optimizer.init, params),
           "step": jax.ShapeDtypeStruct((), jnp.int32)}
  shard = {
      "params": sharding.shardings(boxed["params"], mesh, p_rules),
      "opt_state": sharding.shardings(boxed["opt_state"], mesh, rules),
      "step": NamedSharding(mesh, PartitionSpec()),
  }
  abstract = nn.unbox(boxed)
  for part in ("params", "opt_state"):  # the parameter's own name first in the message
    sharding.check_divisible(abstract[part], shard[part], part)
  abstract = jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shard)
  return abstract, shard


def init_train_state(
    cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh, rng: jax.Array,
    rules: Rules = sharding.RULES, mode: str = "fsdp",
) -> State:
  """Parameters and optimizer state on their shards: made there (jit with out_shardings), or
  on an accelerator made by the host's CPU and put there (`host_for_init`)."""
  return _init_fn(cfg, optimizer, mesh, _hashable(rules), mode)(rng)


@functools.lru_cache(maxsize=16)
def _init_fn(cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
             rules: Rules, mode: str, host: jax.Device | None | str = "auto"):
  """`init(rng) -> state`: jitted onto the mesh, or on `host` (a CPU device; "auto": the local
  CPU where `host_for_init` allows) and then copied onto the mesh's shards."""
  abstract, shard = state_shardings(cfg, optimizer, mesh, rules, mode)

  def init_state(rng):
    return nn.unbox(_boxed_state(cfg, optimizer, rng))

  # The init runs once per run: on CPU, LLVM's optimisation of its random-number kernels took
  # as long as compiling the train step (3.7 s of CPU for a 70k-parameter model, 1.2 s
  # unoptimised) to save microseconds. Values can move in the last bit against an optimised
  # build (about 4% of elements, 1 ulp), the same on every CPU run.
  cpu = all(d.platform == "cpu" for d in mesh.devices.flat)
  if host == "auto":
    host = None if cpu else host_for_init(abstract)
  if host is None:
    return jax.jit(init_state, out_shardings=shard,
                   compiler_options=INIT_COMPILER_OPTIONS if cpu else None)
  small = sum(x.size for x in jax.tree.leaves(abstract)) <= HOST_INIT_UNOPTIMISED_MAX
  on_host = jax.jit(init_state, out_shardings=jax.sharding.SingleDeviceSharding(host),
                    compiler_options=INIT_COMPILER_OPTIONS if small else None)
  return lambda rng: jax.device_put(on_host(jax.device_put(rng, host)), shard)


def host_for_init(abstract: State) -> jax.Device | None:
  """The local CPU device that initialises a state this small for an accelerator's mesh, or
  None: several processes (each would need the whole state), a state above
  `HOST_INIT_MAX_BYTES`, or no CPU backend (JAX_PLATFORMS without cpu)."""
  nbytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(abstract))
  if jax.process_count() > 1 or nbytes > HOST_INIT_MAX_BYTES:
    return None
  try:
    return jax.local_devices(backend="cpu")[0]
  except RuntimeError:
    return None


def _hashable(rules: Rules) -> Rules:
  return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in rules)


def _loss_and_grads(cfg: ModelConfig, mesh: Mesh, rules: Rules, params, batch):
  # The activation constraints in the decoder resolve against this mesh and table.
  with jax.sharding.use_abstract_mesh(mesh.abstract_mesh), nn.logical_axis_rules(rules):
    return jax.value_and_grad(
        functools.partial(decoder.loss_fn, cfg), has_aux=True)(params, batch)


@functools.lru_cache(maxsize=16)
def _grad_shardings(cfg: ModelConfig, mesh: Mesh, rules: Rules) -> Any:
  """Gradients are sharded under the full rules, like the optimizer state, in both modes."""
  return sharding.shardings(_boxed_params(cfg), mesh, rules)


@functools.lru_cache(maxsize=16)
def _boxed_params(cfg: ModelConfig) -> Any:
  """The boxed parameters' shapes and logical names: one abstract trace of the model per
  config for the state's and the gradients' shardings (it was one each)."""
  return jax.eval_shape(lambda: decoder.init_params(cfg, jax.random.key(0)))


def make_train_step(
    cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
    rules: Rules = sharding.RULES, mode: str = "fsdp", global_batch_size: int | None = None,
    grad_accum: int = 1,
):
  """jit(state, batch, lr) -> (state, metrics); the state argument is donated.

  `batch`: {"inputs", "targets"[, "mask"]}, each BxS, as global arrays (or host arrays on a
  single process); `lr`: this step's learning rate, a float32 scalar (`np.float32`: a Python
  float is weakly typed, another trace). `mode`: "fsdp" (ZeRO-3) or "shard_grad_op" (ZeRO-2:
  parameters replicated over `fsdp`, gradients and optimizer state sharded). `grad_accum` = k
  splits the batch into k microbatches inside the one jitted step (a `lax.scan`), for batches
  that do not fit: the update equals the full batch's up to float summation order.
  """
  _, shard = state_shardings(cfg, optimizer, mesh, rules, mode)
  if global_batch_size is not None:
    sharding.check_batch(global_batch_size, sharding.batch_divisor(mesh, rules), grad_accum)
  return _train_step(cfg, optimizer, mesh, _hashable(rules), mode, grad_accum)


@functools.lru_cache(maxsize=16)
def _train_step(cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
                rules: Rules, mode: str, grad_accum: int):
  _, shard = state_shardings(cfg, optimizer, mesh, rules, mode)
  replicated = NamedSharding(mesh, PartitionSpec())
  return jax.jit(
      _step_fn(cfg, optimizer, mesh, rules, mode, grad_accum),
      in_shardings=(shard, sharding.batch_sharding(mesh, rules), replicated),
      out_shardings=(shard, replicated), donate_argnums=0)


def make_train_chunk(
    cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
    rules: Rules = sharding.RULES, mode: str = "fsdp", global_batch_size: int | None = None,
    grad_accum: int = 1, K: int = 16,
):
  """jit(state, batches, lrs, n) -> (state, metrics of the n-th step): up to K train steps in
  one dispatch, the state argument donated.

  `batches`: {"inputs", "targets"}, each KxBxS (step i of the chunk is row i); `lrs`: K float32
  learning rates; `n`: an int32 scalar, 1 <= n <= K, the steps to take (rows past n are
  padding, never read). Each step is `make_train_step`'s, in a loop with a dynamic trip count,
  so a chunk cut short by a log, eval or checkpoint step runs the same program: one compile
  per K, and the parameters equal K single steps' to the bit (tests/sweeps/test_chunk.py).
  """
  if global_batch_size is not None:
    sharding.check_batch(global_batch_size, sharding.batch_divisor(mesh, rules), grad_accum)
  return _train_chunk(cfg, optimizer, mesh, _hashable(rules), mode, grad_accum, K)


@functools.lru_cache(maxsize=16)
def _train_chunk(cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
                 rules: Rules, mode: str, grad_accum: int, K: int):
  _, shard = state_shardings(cfg, optimizer, mesh, rules, mode)
  replicated = NamedSharding(mesh, PartitionSpec())
  chunk_shard = NamedSharding(mesh, PartitionSpec(None, *sharding.batch_sharding(mesh, rules).spec))
  # jitted inside the chunk (XLA inlines it) so that the metrics' shapes below and the loop's
  # body share one trace of the model.
  train_step = jax.jit(_step_fn(cfg, optimizer, mesh, rules, mode, grad_accum))

  def train_chunk(state: State, batches_KxBxS: dict[str, jax.Array], lrs_K: jax.Array,
                  n: jax.Array) -> tuple[State, dict[str, jax.Array]]:
    def body(i, carry):
      batch = jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, i, keepdims=False),
                           batches_KxBxS)
      return train_step(carry[0], batch, lrs_K[i])

    first = jax.tree.map(lambda x: x[0], batches_KxBxS)
    # The loop carries the last step's metrics: zeros of their shapes to start.
    _, m_shape = jax.eval_shape(train_step, state, first, lrs_K[0])
    metrics = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), m_shape)
    return jax.lax.fori_loop(0, n, body, (state, metrics))

  return jax.jit(
      train_chunk, in_shardings=(shard, chunk_shard, replicated, replicated),
      out_shardings=(shard, replicated), donate_argnums=0)


@functools.lru_cache(maxsize=16)
def _step_fn(cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
             rules: Rules, mode: str, grad_accum: int):
  """The train step as a traceable function: the body of the one-step and the chunk programs."""
  batch_shard = sharding.batch_sharding(mesh, rules)
  grad_shard = _grad_shardings(cfg, mesh, rules)
  tx = optax.with_extra_args_support(optimizer)

  def grads_of(params, batch):
    if grad_accum == 1:
      (_, metrics), grads = _loss_and_grads(cfg, mesh, rules, params, batch)
      return metrics, grads
    # Microbatch i takes rows i, i+k, i+2k, ...: every data shard keeps its share of rows
    # (a contiguous split would put each microbatch on a few devices only).
    micro = jax.tree.map(
        lambda x: jax.lax.with_sharding_constraint(
            x.reshape(x.shape[0] // grad_accum, grad_accum, *x.shape[1:]).swapaxes(0, 1),
            NamedSharding(mesh, PartitionSpec(None, *batch_shard.spec))), batch)

    def body(acc, mb):
      (_, m), g = _loss_and_grads(cfg, mesh, rules, params, mb)
      # Weight each microbatch by its tokens so the result is the full batch's token mean.
      g = jax.tree.map(lambda a, b: a + b * m["tokens"], acc[0], g)
      return (g, acc[1] + m["loss"] * m["tokens"], acc[2] + m["tokens"]), None

    zeros = jax.tree.map(jnp.zeros_like, params)
    (g, loss_sum, tokens), _ = jax.lax.scan(body, (zeros, 0.0, 0.0), micro)
    return {"loss": loss_sum / tokens, "tokens": tokens}, jax.tree.map(lambda x: x / tokens, g)

  def train_step(state: State, batch: dict[str, jax.Array], lr: jax.Array
                 ) -> tuple[State, dict[str, jax.Array]]:
    metrics, grads = grads_of(state["params"], batch)
    # ZeRO-2: reduce-scatter the gradients onto the optimizer-state shards.
    grads = jax.lax.with_sharding_constraint(grads, grad_shard)
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"],
                                   learning_rate=jnp.asarray(lr, jnp.float32))
    params = optax.apply_updates(state["params"], updates)
    metrics = {**metrics, "grad_norm": optax.tree.norm(grads)}
    return {"params": params, "opt_state": opt_state, "step": state["step"] + 1}, metrics

  return train_step


def make_eval_step(
    cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
    rules: Rules = sharding.RULES, mode: str = "fsdp",
):
  """jit(params, batch) -> {"loss_sum", "tokens", "row_loss_sums"}: float32 cross-entropy
  summed over the batch and over each row (B), no z-loss.

  Sums, not means, so eval batches of any size add up to the exact token-weighted mean. A
  negative target is not counted: the multiple-choice rows of sweeps/train/tasks.py mark so
  what is not their choice, and are scored by this program (their rows' sums), so a run's
  tasks compile nothing of their own. The eval set's targets are token ids, all counted.
  """
  return _eval_step(cfg, optimizer, mesh, _hashable(rules), mode)


@functools.lru_cache(maxsize=16)
def _eval_step(cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
               rules: Rules, mode: str):
  _, shard = state_shardings(cfg, optimizer, mesh, rules, mode)
  eval_cfg = dataclasses.replace(cfg, z_loss=0.0)

  def eval_step(params, batch):
    targets_BxS = batch["targets"]
    mask_BxS = (targets_BxS >= 0).astype(jnp.float32)
    with jax.sharding.use_abstract_mesh(mesh.abstract_mesh), nn.logical_axis_rules(rules):
      logits_BxSxV = decoder.Decoder(eval_cfg).apply({"params": params}, batch["inputs"])
    ce_BxS = optax.softmax_cross_entropy_with_integer_labels(
        logits_BxSxV, jnp.maximum(targets_BxS, 0)) * mask_BxS
    # decoder.loss_fn's arithmetic (a mean times the tokens), so the eval loss keeps its bits.
    tokens = mask_BxS.sum()
    loss_sum = ce_BxS.sum() / jnp.maximum(tokens, 1.0) * tokens
    return {"loss_sum": loss_sum, "tokens": tokens, "row_loss_sums": ce_BxS.sum(axis=-1)}

  return jax.jit(eval_step, in_shardings=(shard["params"], sharding.batch_sharding(mesh, rules)),
                 out_shardings=NamedSharding(mesh, PartitionSpec()))
