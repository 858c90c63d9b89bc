"""The device mesh (`make_mesh`), the one table from logical axis names to its axes (`RULES`),
and what follows from them.

Parameters name their axes (`models.decoder`): `vocab`, `embed`, `heads`, `kv`, `mlp`,
`layers`; activations use `act_*` names and the batch `batch`. `RULES` maps each to mesh
axes of `AXES`:

    FSDP (ZeRO-3)      embed -> fsdp: every matrix is split along d_model over `fsdp` and
                       all-gathered just in time; gradients are reduce-scattered.
    tensor parallel    heads, mlp, vocab -> tensor (Megatron column/row split).
    batch              batch -> (data, fsdp).

Optimizer state has the parameters' logical names (optax maps over the boxed tree), so it
follows the parameter sharding. `shard_grad_op` (ZeRO-2) is derived from the same table:
parameters drop `fsdp` (replicated over it) while gradients and optimizer state keep it.

The mesh's axes, ('data', 'fsdp', 'tensor'), span every device of the job:

* `data`: pure data parallelism (replicated parameters); across TPU slices it is the only
  axis that crosses the slow data-centre network (DCN), so multi-slice meshes put the slices
  on `data`.
* `fsdp`: data parallelism whose parameters, gradients and optimizer state are sharded
  (ZeRO-3); the batch is split over `data` x `fsdp`.
* `tensor`: Megatron-style tensor parallelism over heads, MLP width and vocabulary.

Multi-host: after `jax.distributed.initialize()` each process sees every device of the job in
`jax.devices()` (global), so the same call builds the same global mesh on every host.
Axis types are `Auto` (sharding propagated by the compiler from the in/out shardings and
the logical constraints), not jax's newer `Explicit` default for `jax.make_mesh`."""

from collections.abc import Sequence
import math
from typing import Any

import flax.linen as nn
import jax
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec
import numpy as np

from chinchax.errors import UserError


Rules = Sequence[tuple[str, str | tuple[str, ...] | None]]

RULES: tuple[tuple[str, str | tuple[str, ...] | None], ...] = (
    # data
    ("batch", ("data", "fsdp")),
    # parameters
    ("embed", "fsdp"),
    ("heads", "tensor"),
    ("mlp", "tensor"),
    ("vocab", "tensor"),
    ("kv", None),
    ("layers", None),
    # activations: the residual stream is split over the batch only
    ("act_batch", ("data", "fsdp")),
    ("act_len", None),
    ("act_embed", None),
    ("act_heads", "tensor"),
    ("act_kv", None),
    ("act_mlp", "tensor"),
    ("act_vocab", "tensor"),
)
PARAM_AXES: tuple[str, ...] = ("embed", "heads", "mlp", "vocab", "kv", "layers")
MODES: tuple[str, ...] = ("fsdp", "shard_grad_op")


def _targets(target) -> tuple[str, ...]:
  if target is None:
    return ()
  return (target,) if isinstance(target, str) else tuple(target)


def validate_rules(rules: Rules, mesh: Mesh) -> Rules:
  """Refuse a table that names a mesh axis the mesh does not have."""
  for name, target in rules:
    for axis in _targets(target):
      if axis not in mesh.axis_names:
        raise UserError(
            f"sharding rules: {name!r} -> {axis!r} names a mesh axis that does not exist; "
            f"mesh axes are {', '.join(mesh.axis_names)}")
  if "batch" not in {name for name, _ in rules}:
    raise UserError("sharding rules: no rule for 'batch'; add ('batch', ('data', 'fsdp'))")
  return rules


def param_rules(rules: Rules, mode: str) -> Rules:
  """Rules for the parameters themselves: `shard_grad_op` replicates them over `fsdp`."""
  if mode not in MODES:
    raise UserError(f"sharding: mode {mode!r} is not one of {', '.join(MODES)}")
  if mode == "fsdp":
    return rules
  out = []
  for name, target in rules:
    if name in PARAM_AXES:
      kept = tuple(a for a in _targets(target) if a != "fsdp")
      target = None if not kept else kept[0] if len(kept) == 1 else kept
    out.append((name, target))
  return tuple(out)


def batch_sharding(mesh: Mesh, rules: Rules, ndim: int = 2) -> NamedSharding:
  """Batch-leading arrays (tokens BxL) split over the rules' `batch` mesh axes."""
  target = dict(rules)["batch"]
  return NamedSharding(mesh, PartitionSpec(target, *([None] * (ndim - 1))))


def batch_divisor(mesh: Mesh, rules: Rules) -> int:
  return int(np.prod([mesh.shape[a] for a in _targets(dict(rules)["batch"])]))


def check_batch(batch_size: int, shards: int, grad_accum: int = 1, hint: str = "") -> None:
  """The one answer to "does this batch split?": `grad_accum` microbatches, each over `shards`
  data-parallel shards (`batch_divisor` of a mesh, or the data path's count of a sharding).
  `hint`: what the caller can change, after the arithmetic."""
  if batch_size <= 0 or batch_size % grad_accum or (batch_size // grad_accum) % shards:
    micro = f" in {grad_accum} microbatches" if grad_accum > 1 else ""
    raise UserError(
        f"batch {batch_size}{micro} does not split over {shards} data-parallel shard"
        f"{'s' if shards != 1 else ''}; use a multiple of {shards * grad_accum}"
        + (f", or {hint}" if hint else ""))


def shardings(boxed: Any, mesh: Mesh, rules: Rules) -> Any:
  """NamedShardings for a (possibly abstract) tree of logically partitioned values."""
  return nn.logical_to_mesh_sharding(nn.get_partition_spec(boxed), mesh, rules)


def check_divisible(abstract: Any, sharding_tree: Any, what: str = "") -> None:
  """Refuse, naming the parameter, any dimension its mesh axes do not split evenly."""
  flat, _ = jax.tree_util.tree_flatten_with_path(abstract)
  flat_s = jax.tree.leaves(sharding_tree, is_leaf=lambda x: isinstance(x, NamedSharding))
  for (path, x), s in zip(flat, flat_s):
    for dim, axes in zip(x.shape, s.spec):
      k = int(np.prod([s.mesh.shape[a] for a in _targets(axes)]))
      if dim % k:
        raise UserError(
            f"sharding: {what}{jax.tree_util.keystr(path)} has a dimension of {dim} that mesh axes "
            f"{_targets(axes)} ({k} devices) do not divide; change the shape or the mesh")


def shard_shape(shape: Sequence[int], logical: Sequence[str | None], mesh: Mesh,
                rules: Rules) -> tuple[int, ...]:
  """The per-device shape the rules imply for a global `shape` with `logical` axis names."""
  spec = nn.logical_to_mesh_axes(tuple(logical), rules)
  out = []
  for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
    out.append(dim // int(np.prod([mesh.shape[a] for a in _targets(axes)])))
  return tuple(out)


AXES: tuple[str, str, str] = ("data", "fsdp", "tensor")


def resolve_shape(shape: Sequence[int], n_devices: int) -> tuple[int, ...]:
  """`shape` over AXES with at most one -1, which takes the remaining devices."""
  shape = tuple(int(n) for n in shape)
  if len(shape) != len(AXES):
    raise UserError(f"mesh: shape {shape} must give one size per axis {AXES}")
  if shape.count(-1) > 1 or any(n == 0 or n < -1 for n in shape):
    raise UserError(f"mesh: shape {shape} must be positive sizes with at most one -1")
  known = math.prod(n for n in shape if n != -1)
  if -1 in shape:
    if n_devices % known:
      raise UserError(
          f"mesh: shape {shape} cannot fill {n_devices} devices ({n_devices} is not a "
          f"multiple of {known}); change the sizes")
    shape = tuple(n_devices // known if n == -1 else n for n in shape)
  if math.prod(shape) != n_devices:
    raise UserError(
        f"mesh: shape {dict(zip(AXES, shape))} has {math.prod(shape)} devices but the job has "
        f"{n_devices}; make the sizes multiply to {n_devices} or use -1 for one axis")
  return shape


def make_mesh(shape: Sequence[int] = (1, -1, 1), devices: Sequence | None = None) -> Mesh:
  """A mesh over `devices` (default: all of the job's devices, every host)."""
  devices = list(jax.devices() if devices is None else devices)
  shape = resolve_shape(shape, len(devices))
  auto = (AxisType.Auto,) * len(AXES)
  slices = sorted({getattr(d, "slice_index", 0) for d in devices})
  if len(slices) > 1:
    n_slices = len(slices)
    if shape[0] % n_slices:
      raise UserError(
          f"mesh: {n_slices} TPU slices need data={shape[0]} to be a multiple of {n_slices} "
          "(slices are joined over the data axis)")
    per_slice = (shape[0] // n_slices, shape[1], shape[2])
    grid = mesh_utils.create_hybrid_device_mesh(
        per_slice, (n_slices, 1, 1), devices=devices)
    return Mesh(np.asarray(grid), AXES, axis_types=auto)
  return jax.make_mesh(shape, AXES, axis_types=auto, devices=devices)
