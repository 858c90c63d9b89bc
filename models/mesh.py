"""The device mesh: axes ('data', 'fsdp', 'tensor') over every device of the job.

* `data`: pure data parallelism (replicated parameters); across TPU slices it is the only
  axis that crosses the slow data-centre network (DCN), so multi-slice meshes put the slices
  on `data`.
* `fsdp`: data parallelism whose parameters, gradients and optimizer state are sharded
  (ZeRO-3); the batch is split over `data` x `fsdp`.
* `tensor`: Megatron-style tensor parallelism over heads, MLP width and vocabulary.

Multi-host: after `jax.distributed.initialize()` each process sees every device of the job in
`jax.devices()` (global), so the same call builds the same global mesh on every host.
Axis types are `Auto` (sharding propagated by the compiler from the in/out shardings and
the logical constraints), not jax's newer `Explicit` default for `jax.make_mesh`.
"""

import math
from collections.abc import Sequence

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh

from chinchax.errors import UserError

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
