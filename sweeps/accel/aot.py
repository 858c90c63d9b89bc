"""One cell's train and eval steps compiled ahead of time for a target's devices.

    devices = aot.target_devices(hardware.parse_target("v5p:2x2x4"))   # 16 compile-only chips
    train, eval = aot.compile_setup(setup, devices)

With libtpu installed, `jax.experimental.topologies` describes any TPU slice without the chips
(compile-only devices); elsewhere the target is this machine's own devices. Nothing is
allocated: the state and the batch are ShapeDtypeStructs carrying their shardings
(`sweeps.train.step.state_shardings`: the config's mesh, `models.sharding.RULES`, fsdp or
shard_grad_op), the steps are the ones a run jits, lowered with `.lower()` and compiled with
`.compile()` exactly as on the slice: the train chunk the trainer dispatches
(`sweeps.train.step.make_train_chunk`: `Setup.K` steps, the cell's `steps_per_dispatch`, over
K stacked batches, with the cell's batch and grad_accum), or the one-step program where the
trainer keeps one step per dispatch (K = 1: a sequence-length warmup, whose batches change
shape; its full length is the largest program), and `make_eval_step`.

What a compiled program reports, per chip (`Compiled.memory_analysis()`): arguments, outputs,
the outputs aliased to donated arguments, temporaries and code; its peak HBM is

    hbm = arguments + outputs − aliased + temporaries + code

all of it HBM. Arguments are padded to the chip's memory tiles (`layout_bytes`; an f32 shard
whose minor dimension is 64 takes twice its bytes in (8,128) tiles). Temporaries are those in
HBM only: a TPU keeps what fits of a step's temporaries in its on-chip VMEM, so a small step
reports none (the tiny config's first cell on v5e:2x2: 5 MiB of temporaries, all in VMEM).

A program that cannot fit a TPU is refused by its compiler (RESOURCE_EXHAUSTED); then its HBM
is the arguments (counted from the shardings) plus the temporaries the error names, a lower
bound. A GPU's compiler refuses nothing: the fit is the caller's comparison alone. The
arguments of a chunk hold its K batches (K x B x S inputs and targets, K learning rates). The
eval step runs while the train state stays resident, so its peak is the train program's
arguments plus its own outputs, temporaries and code. FLOPs per step are the compiled
program's (`sweeps.accel.hlo_flops`, every loop counted) × devices / K: the chunk's loop runs to
an argument n that the program does not hold, and is counted K times, a full chunk.
"""

import dataclasses
import importlib.util
import math
import os
import re
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from chinchax.errors import UserError
from chinchax.models import sharding
from chinchax.models import sharding as mesh_lib
from chinchax.models.config import ModelConfig
from chinchax.sweeps.accel import aot_cache, gpu_aot, hlo_flops
from chinchax.sweeps.chips import hardware
from chinchax.sweeps.train import optimizer
from chinchax.sweeps.train import step as step_lib

_SIZE = r"([0-9.]+)([KMGTP]?)i?B?"
_OOM = (re.compile(r"required for HLO temporaries \(" + _SIZE + r"\) exceeds available HBM \("
                   + _SIZE + r"\)"),
        re.compile(r"Used " + _SIZE + r" of " + _SIZE + r" hbm"))
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


@dataclasses.dataclass(frozen=True)
class Setup:
  """How a cell is computed: everything its compiled steps depend on."""
  model: ModelConfig
  optimizer: optimizer.OptimizerConfig
  steps: int
  mesh: tuple[int, int, int]
  mode: str = "fsdp"
  batch_size: int = 1
  grad_accum: int = 1
  K: int = 1            # train steps per dispatch: the chunk program, or the one step (1)


@dataclasses.dataclass(frozen=True)
class Program:
  """What one compiled program reports, per chip."""
  argument_bytes: int
  output_bytes: int = 0
  alias_bytes: int = 0
  temp_bytes: int = 0
  code_bytes: int = 0
  flops: float | None = None        # per step, all devices, loops counted
  flops_xla: float | None = None    # XLA's own per-device figure (loop bodies once: of a
                                    # chunk, one step and what is outside its loop)
  compile_s: float = 0.0
  error: str | None = None          # the compiler's refusal, one line
  cached: bool = False              # read from `sweeps.accel.aot_cache`; compile_s is the first's

  @property
  def hbm_bytes(self) -> int:
    return (self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes
            + self.code_bytes)


def has_libtpu() -> bool:
  return importlib.util.find_spec("libtpu") is not None


def _quiet_stderr(fn: Callable):
  """Runs fn with fd 2 pointed at /dev/null: libtpu prints start-up warnings about the TPU
  VM it is not on (no accelerator type, no worker hostnames) that do not apply here."""
  saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 2)
  try:
    return fn()
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(null)


def target_devices(target: hardware.Target | hardware.GpuNode | None) -> list:
  """Compile-only devices of a TPU target (needs libtpu) or of GPU nodes (jax's CUDA plugin,
  `sweeps.accel.gpu_aot`), or this host's devices for None."""
  if target is None:
    return list(jax.devices())
  if isinstance(target, hardware.GpuNode):
    return gpu_aot.target_devices(target)
  if not has_libtpu():
    raise UserError(f"compiling for {target.name} needs libtpu on this machine: "
                    "pip install 'chinchax[tpu]' (jax[tpu] pins the libtpu built for this jax)")
  # libtpu takes a machine-wide lock on load, for the chips; compiling needs none, and two
  # dry runs (or test workers) at once would otherwise refuse each other.
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
  name, kw = target.libtpu_args()

  def describe():
    jax.devices("cpu")  # the backends start here, with libtpu's notes
    return topologies.get_topology_desc(name, "tpu", **kw).devices

  try:
    devices = _quiet_stderr(describe)
  except jax.errors.JaxRuntimeError as e:
    raise UserError(f"libtpu cannot describe {target.name}: {_first_line(e)}") from None
  if len(devices) != target.chips:
    raise UserError(f"libtpu describes {target.name} with {len(devices)} devices, not the "
                    f"{target.chips} chips it has; give the topology in chips")
  return list(devices)


def hbm_capacity(devices: Sequence) -> int | None:
  """Usable HBM per device: the TPU table, a GPU's allocator limit (XLA's pool, the GPU's
  memory times XLA_PYTHON_CLIENT_MEM_FRACTION for a compile-only one), None for a CPU."""
  kind = getattr(devices[0], "device_kind", "")
  for chip in hardware.TPU_CHIPS.values():
    if kind == chip.device_kind:
      return chip.hbm_bytes
  if getattr(devices[0], "platform", "") == "gpu":
    try:
      return int(devices[0].memory_stats()["bytes_limit"])
    except Exception:  # pylint: disable=broad-except  # compile-only: no allocator
      gpu = hardware.gpu_for_kind(kind)
      return gpu_aot.pool_bytes(gpu) if gpu else None
  return None


def _first_line(e: Exception) -> str:
  return next((l.strip() for l in str(e).splitlines() if l.strip()), type(e).__name__)


def layout_bytes(shape: Sequence[int], dtype, layout) -> int:
  """Bytes of one array as `layout` (a `jax.experimental.layout.Layout`) lays it out.

  A TPU stores an array in tiles over its most minor dimensions (the compiler picks them per
  argument: `Compiled.input_formats`), e.g. f32[2,64,4,64] with major_to_minor (0,1,2,3) in
  T(4,128) tiles pads its last dimension from 64 to 128 and takes twice its logical bytes; a
  scalar in T(128) takes 512 bytes. Dimensions the shape lacks count as 1 and are padded
  too. The first tile sets the padding (later ones subdivide it); a CPU has no tiles.
  """
  physical = [shape[d] for d in layout.major_to_minor] or ([1] if layout.tiling else [])
  if layout.tiling:
    tile = layout.tiling[0]
    physical = [1] * (len(tile) - len(physical)) + physical
    k = len(tile)
    physical = physical[:-k] + [-(-d // t) * t for d, t in zip(physical[-k:], tile)]
  bits = layout.sub_byte_element_size_in_bits or 8 * np.dtype(dtype).itemsize
  return -(-math.prod(physical) * bits // 8)


def _shard_bytes(tree) -> int:
  """Bytes per device of a tree of sharded ShapeDtypeStructs (the largest shard), untiled:
  a lower bound of what a TPU stores (`layout_bytes`)."""
  total = 0
  for x in jax.tree.leaves(tree):
    shape = x.sharding.shard_shape(x.shape) if x.sharding is not None else x.shape
    total += math.prod(shape) * np.dtype(x.dtype).itemsize
  return total


def _required_temp(message: str) -> int | None:
  for pattern in _OOM:
    m = pattern.search(message)
    if m:
      return int(float(m.group(1)) * _UNITS[m.group(2)])
  return None


def _compile(lowered, devices: Sequence, arguments: int, K: int = 1) -> Program:
  """Compiles, or reads what an identical compile reported before (`sweeps.accel.aot_cache`)."""
  k = aot_cache.key(lowered, devices)
  seen = aot_cache.load(k)
  if seen is not None:
    try:
      return dataclasses.replace(Program(**seen), cached=True)
    except TypeError:  # written by another version of Program: compile again
      pass
  program = _compile_now(lowered, len(devices), arguments, K)
  aot_cache.store(k, dataclasses.asdict(program))
  return program


def _compile_now(lowered, n_devices: int, arguments: int, K: int = 1) -> Program:
  t = time.perf_counter()
  try:
    compiled = lowered.compile()
  except jax.errors.JaxRuntimeError as e:
    message = str(e)
    if "RESOURCE_EXHAUSTED" not in message:
      raise
    temp = _required_temp(message) or 0
    return Program(arguments, temp_bytes=temp, compile_s=time.perf_counter() - t,
                   error=_first_line(e))
  seconds = time.perf_counter() - t
  m = compiled.memory_analysis()
  # A chunk's loop runs to its argument n: counted as a full chunk, K steps, then per step.
  counted = hlo_flops.count(compiled.as_text(), entry_trips=K if K > 1 else None)
  return Program(
      int(m.argument_size_in_bytes), int(m.output_size_in_bytes), int(m.alias_size_in_bytes),
      int(m.temp_size_in_bytes), int(m.generated_code_size_in_bytes),
      flops=counted.flops * n_devices / K, flops_xla=counted.flops_once, compile_s=seconds)


@dataclasses.dataclass(frozen=True)
class Lowered:
  """A setup's steps traced and lowered for a mesh, ready to compile (the slow part)."""
  train: object
  eval: object | None
  devices: Sequence
  train_arguments: int
  eval_arguments: int
  state: object         # the abstract state: ShapeDtypeStructs with their shardings
  K: int = 1            # train steps in one dispatch of `train`


def lower(setup: Setup, devices: Sequence, with_eval: bool = True) -> Lowered:
  """Traces and lowers the setup's steps over `devices` (UserError if it cannot shard)."""
  mesh = mesh_lib.make_mesh(setup.mesh, devices=devices)
  cfg = setup.model
  if cfg.attn_block is None and devices[0].platform != "cpu":
    # The CPU's query blocks are chosen by the backend that runs; a target compiled for on
    # this CPU runs the plain attention its own backend would.
    cfg = dataclasses.replace(cfg, attn_block=0)
  # The kernel the target's backend would pick, not this process's (a deviceless compile).
  cfg = dataclasses.replace(cfg, attention=gpu_aot.attention_here(cfg, devices[0].platform))
  cfg = cfg.validate()
  tx = optimizer.make(setup.optimizer)  # the run's: the learning rate an argument of the step
  rules = sharding.RULES
  abstract, _ = step_lib.state_shardings(cfg, tx, mesh, rules, setup.mode)
  bs = sharding.batch_sharding(mesh, rules)
  batch = {k: jax.ShapeDtypeStruct((setup.batch_size, cfg.shape.seq_len), jnp.int32,
                                   sharding=bs) for k in ("inputs", "targets")}
  lowered_eval = None
  if with_eval:
    evaluate = step_lib.make_eval_step(cfg, tx, mesh, rules, setup.mode)
    lowered_eval = evaluate.lower(abstract["params"], batch)
  scalar = lambda dtype: jax.ShapeDtypeStruct((), dtype)
  if setup.K == 1:
    train = step_lib.make_train_step(cfg, tx, mesh, rules, setup.mode,
                                     global_batch_size=setup.batch_size,
                                     grad_accum=setup.grad_accum)
    args = (batch, scalar(jnp.float32))
  else:  # the trainer's chunk (sweeps/train/loop.py `compiled`): K batches, K rates, n
    train = step_lib.make_train_chunk(cfg, tx, mesh, rules, setup.mode,
                                      global_batch_size=setup.batch_size,
                                      grad_accum=setup.grad_accum, K=setup.K)
    chunk = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, *bs.spec))
    args = ({k: jax.ShapeDtypeStruct((setup.K, *x.shape), x.dtype, sharding=chunk)
             for k, x in batch.items()},
            jax.ShapeDtypeStruct((setup.K,), jnp.float32), scalar(jnp.int32))
  return Lowered(train.lower(abstract, *args), lowered_eval, list(mesh.devices.flat),
                 _shard_bytes(abstract) + _shard_bytes(args),
                 _shard_bytes(abstract["params"]) + _shard_bytes(batch), abstract, setup.K)


def compile_lowered(low: Lowered) -> tuple[Program, Program | None]:
  """(train, eval) as compiled; the eval's HBM includes the resident train state."""
  train = _compile(low.train, low.devices, low.train_arguments, low.K)
  if low.eval is None or train.error:
    return train, None
  ev = _compile(low.eval, low.devices, low.eval_arguments)
  # The train state stays in HBM while the eval runs: its peak is on top of the whole state.
  resident = train.argument_bytes if not ev.error else low.train_arguments
  ev = dataclasses.replace(ev, argument_bytes=resident, alias_bytes=0)
  return train, ev


def compile_setup(setup: Setup, devices: Sequence,
                  with_eval: bool = True) -> tuple[Program, Program | None]:
  return compile_lowered(lower(setup, devices, with_eval))
