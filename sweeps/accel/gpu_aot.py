"""Compile-only devices of a GPU node on a machine without a GPU (deviceless compilation).

    devices = gpu_aot.target_devices(hardware.gpu_node("h100:16"))   # 2 nodes x 8 H100s

jax's CUDA plugin describes a node from the card's XLA spec (a `GpuTargetConfigProto` in text,
`gpu_targets/*.txtpb`, shipped with chinchax) through `jax.experimental.topologies`, and XLA
compiles for those devices on this CPU ("Found GPU target config and no PjRtClient.
Performing a deviceless compilation"). It needs the plugin and the CUDA compiler (ptxas,
libdevice), not the driver: `pip install 'chinchax[gpu-compile]'` (223 MB to download).

What such a compile cannot know, and the dry run states:
- the memory a process may use is not the card's: XLA preallocates a fraction of it
  (XLA_PYTHON_CLIENT_MEM_FRACTION, 0.75 unless set; launch/gpu.py sets 0.9), and the CUDA
  context and NCCL's buffers live outside that pool. `pool_bytes` is that fraction of the card,
  what a real GPU's `memory_stats()["bytes_limit"]` reports;
- without a GPU there is no autotuning: GEMMs compile as Triton fusions, where the GPU may pick
  cuBLAS with a workspace in the program's temporaries (`AUTOTUNE_MARGIN`: forcing cuBLAS
  moved the temporaries of one H100's 50M, 350M and 1B train steps by +0.5%, +0.3%, -0.2%).
- cuDNN's fused attention (`models.config` `attention`, the GPU's default in bfloat16) traces
  only where the cuDNN library loads, which the gpu-compile extra does not install. Without
  it each cell's attention is compiled written out (`NO_CUDNN`), and the dry run says so.
`cost_analysis()` is None for a deviceless executable; the FLOPs come from the HLO text
(`sweeps.accel.hlo_flops`), as for a TPU.
"""

import importlib.resources
import importlib.util
import os
import shutil

import jax

from chinchax.errors import UserError
from chinchax.sweeps.chips import hardware

EXTRA = "pip install 'chinchax[gpu-compile]'"
DEFAULT_MEM_FRACTION = 0.75  # jax's default for XLA_PYTHON_CLIENT_MEM_FRACTION
AUTOTUNE_MARGIN = (
    "no autotuning without a GPU: GEMMs are compiled as Triton fusions; a GPU may pick cuBLAS, "
    "whose workspace changes the temporaries (cuBLAS forced: -0.2% to +0.5% on 50M-1B "
    "decoders at context 2048, bench/gpu_bench.py --gemm-margin)")


NO_CUDNN = (
    "cuDNN does not load here, so attention was compiled written out (S x T logits in memory), "
    "not as the GPU's fused cuDNN kernel: temporaries are overstated (a 50M model at context "
    "2048 on one H200: 12.1 GiB against 8.8); pip install nvidia-cudnn-cu12 to compile the "
    "kernel the GPU runs")


def cudnn_loads() -> bool:
  """Whether jax's CUDA plugin finds the cuDNN library, without which cuDNN calls can't trace."""
  try:
    from jax._src.lib import cuda_versions  # pylint: disable=g-import-not-at-top
    return cuda_versions is not None and cuda_versions.cudnn_get_version() > 0
  except Exception:  # pylint: disable=broad-except  (no plugin, or "cuDNN not found")
    return False


def attention_here(model, platform: str) -> str:
  """The attention kernel a compile in this process gives a `platform` target: the target's
  own (`ModelConfig.attention_kernel`), but written out (xla) where that is cuDNN's and cuDNN
  does not load here (a deviceless compile: `NO_CUDNN`)."""
  kernel = model.attention_kernel(platform)
  if kernel == "cudnn" and jax.default_backend() == "cpu" and not cudnn_loads():
    return "xla"
  return kernel


def mem_fraction() -> float:
  """The fraction of each GPU's memory XLA may use, as jax will read it on the node."""
  text = os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "")
  try:
    f = float(text) if text else DEFAULT_MEM_FRACTION
  except ValueError:
    raise UserError(f"XLA_PYTHON_CLIENT_MEM_FRACTION={text!r} is not a number; give the "
                    "fraction of GPU memory XLA may use, e.g. 0.75") from None
  if not 0 < f <= 1:
    raise UserError(f"XLA_PYTHON_CLIENT_MEM_FRACTION={text!r}: give a fraction in (0, 1]")
  return f


def pool_bytes(gpu: hardware.Gpu) -> int:
  return int(gpu.hbm_bytes * mem_fraction())


CUDA_PLUGINS = ("xla_cuda12", "xla_cuda13")  # jax[cuda12], jax[cuda13]: either compiles


def has_plugin() -> bool:
  # find_spec of a submodule imports its package, which is absent without any jax plugin.
  return (importlib.util.find_spec("jax_plugins") is not None
          and any(importlib.util.find_spec(f"jax_plugins.{name}") is not None
                  for name in CUDA_PLUGINS))


def ptxas() -> str | None:
  """XLA's ptxas: PATH first, then the one nvidia-cuda-nvcc-cu12 installs."""
  found = shutil.which("ptxas")
  if found:
    return found
  spec = importlib.util.find_spec("nvidia")
  for root in (spec.submodule_search_locations or []) if spec else []:
    path = os.path.join(root, "cuda_nvcc", "bin", "ptxas")
    if os.access(path, os.X_OK):
      return path
  return None


def missing() -> str | None:
  """One line naming what this machine lacks to compile for a GPU, or None."""
  if not has_plugin():
    return f"jax's CUDA plugin is not installed: {EXTRA}"
  if ptxas() is None:
    return f"ptxas (the CUDA compiler) is not installed or on PATH: {EXTRA}"
  return None


def target_config(gpu: hardware.Gpu) -> str:
  if gpu.target_config is None:
    raise UserError(f"no XLA target config ships for {gpu.name}, so it cannot be compiled for "
                    f"here: compile on the node (--compile=local); "
                    f"{', '.join(g.name for g in hardware.GPUS.values() if g.target_config)} "
                    "can be compiled for on this machine")
  folder = importlib.resources.files("chinchax.sweeps.accel") / "gpu_targets"
  return (folder / gpu.target_config).read_text()


def target_devices(node: hardware.GpuNode) -> list:
  """`node.count` compile-only GPUs, `node.nodes` processes of `node.gpus_per_node`."""
  text = target_config(node.gpu)
  why = missing()
  if why:
    raise UserError(f"compiling for {node.name} on this machine: {why}")
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  if not xla_bridge.backends_are_initialized():
    # The plugin starts without a GPU only when CUDA is not a platform to open (else its
    # start-up check of the CUDA runtime fails): the compile needs the CPU alone.
    jax.config.update("jax_platforms", "cpu")
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
  try:
    desc = topologies.get_topology_desc(platform="cuda", topology=node.topology,
                                        target_config=text)
  except NotImplementedError:
    raise UserError(f"jax's CUDA plugin did not start in this process (no GPU here): run "
                    f"with JAX_PLATFORMS=cpu to compile for {node.name}") from None
  except jax.errors.JaxRuntimeError as e:
    first = next((l for l in str(e).splitlines() if l.strip()), type(e).__name__)
    raise UserError(f"jax's CUDA plugin cannot describe {node.name}: {first}") from None
  return list(desc.devices)


def cross_node_axes(mesh: jax.sharding.Mesh) -> list[str]:
  """The mesh axes along which devices of different processes (nodes) meet: the collectives
  over them cross the network, the others stay on the node's NVLink."""
  out = []
  for i, axis in enumerate(mesh.axis_names):
    along = mesh.devices.swapaxes(i, -1).reshape(-1, mesh.devices.shape[i])
    if any(len({d.process_index for d in row}) > 1 for row in along):
      out.append(axis)
  return out
