"""What a GPU dry run states beside its table: the memory a cell may use on each GPU, and which
mesh axes cross the network between nodes (`chinchax sweep --dry-run --compile=h100:16`).

The budget is XLA's pool (the card's memory × XLA_PYTHON_CLIENT_MEM_FRACTION, `gpu_aot`)
less `--headroom` of it: the pool holds the program's arguments, outputs and temporaries,
and the headroom covers what a deviceless compile cannot see (cuBLAS workspaces autotuning
may pick on the GPU, the allocator's fragmentation). The CUDA context and NCCL's buffers
live outside the pool, in the rest of the card.
"""

from collections.abc import Sequence

from chinchax.errors import UserError
from chinchax.models import sharding as mesh_lib
from chinchax.sweeps.accel import gpu_aot
from chinchax.sweeps.chips import hardware


def room(node: hardware.GpuNode, capacity: int, headroom: float, budget: int) -> str:
  g = hardware.GiB
  return (f"{node.gpu.hbm_bytes / g:.1f} GiB each, XLA's pool "
          f"{gpu_aot.mem_fraction():.0%} of it (XLA_PYTHON_CLIENT_MEM_FRACTION): "
          f"{capacity / g:.1f} GiB, {headroom:.0%} of that kept free: {budget / g:.1f} GiB "
          "for the program")


def _meshes(rows, devices: Sequence) -> dict[tuple[int, ...], list[str]]:
  """Each distinct mesh of the rows -> its axes that cross nodes."""
  out = {}
  for r in rows:
    try:
      shape = mesh_lib.resolve_shape(r.setup.mesh, len(devices))
    except UserError:
      continue
    if shape not in out:
      out[shape] = gpu_aot.cross_node_axes(mesh_lib.make_mesh(shape, devices))
  return out


def _sharding_line(node: hardware.GpuNode, shape: tuple[int, ...], cross: list[str]) -> str:
  named = " x ".join(f"{a} {n}" for a, n in zip(mesh_lib.AXES, shape))
  if node.nodes == 1:
    return f"mesh {named}: one node, every collective on NVLink"
  inside = [a for a, n in zip(mesh_lib.AXES, shape) if a not in cross and n > 1]
  return (f"mesh {named}: {', '.join(cross) or 'no axis'} crosses the {node.nodes} nodes "
          f"(its collectives over the network)"
          + (f"; {', '.join(inside)} stays within a node (NVLink)" if inside else ""))


def facts(node: hardware.GpuNode, rows, devices: Sequence) -> dict:
  """The GPU target's facts for the dry run's JSON."""
  return {
      "gpu": node.gpu.name, "device_kind": devices[0].device_kind, "nodes": node.nodes,
      "gpus_per_node": node.gpus_per_node, "memory_bytes": node.gpu.hbm_bytes,
      "mem_fraction": gpu_aot.mem_fraction(), "pool_bytes": gpu_aot.pool_bytes(node.gpu),
      "autotune_margin": gpu_aot.AUTOTUNE_MARGIN,
      "attention": gpu_aot.NO_CUDNN if _attention_written_out(rows, devices) else None,
      "meshes": [{"shape": list(shape), "cross_node_axes": cross,
                  "text": _sharding_line(node, shape, cross)}
                 for shape, cross in _meshes(rows, devices).items()],
  }


def _attention_written_out(rows, devices: Sequence) -> bool:
  """Whether a cell that runs cuDNN's attention on the GPU was compiled without it here."""
  p = devices[0].platform
  return any(r.setup.model.attention_kernel(p) != gpu_aot.attention_here(r.setup.model, p)
             for r in rows)


def text(node: hardware.GpuNode, rows, devices: Sequence, headroom: float) -> str:
  lines = [f"  {_sharding_line(node, shape, cross)}"
           for shape, cross in _meshes(rows, devices).items()]
  if _attention_written_out(rows, devices):
    lines.append(f"  {gpu_aot.NO_CUDNN}")
  lines.append(f"  {gpu_aot.AUTOTUNE_MARGIN}; the {headroom:.0%} headroom covers it. The CUDA "
               "context and NCCL buffers live outside XLA's pool.")
  return "\n".join(lines)
