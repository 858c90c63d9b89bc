"""The hardware a run meets: peak FLOP/s for MFU, the TPU slices and GPU nodes a sweep can
target, and the hardware facts every run record stores.

MFU = (training FLOPs per step, analytic, `scaling.runs.conventions`) / (step time × peak × devices),
with the dense bf16 peak of one device. There is no fair peak for a CPU: its MFU is None and
the record says why.

A TPU target names one slice by its chips, `FAMILY:TOPOLOGY` (`v5p:2x2x4`, `v5e:4x4`,
`v6e:2x2`, `v4:2x2x2`), or by its gcloud accelerator type (`v5p-32`, `v5litepod-16`, `v6e-8`,
whose number counts TensorCores for v4/v5p and chips for v5e/v6e), with `,slices=K` for K
such slices joined over the data-centre network (Multislice). The usable HBM per chip is what
libtpu 0.0.42's compiler reports as available (it keeps a little of each chip for itself).

A GPU target names a node's cards, `NAME:COUNT` (`h100:8`), and more than 8 means nodes of 8
(`h100:16`: 2 nodes). A GPU's memory is its target config's `device_memory_size`: the XLA
spec of the card (`sweeps/accel/gpu_targets/*.txtpb`), which also lets XLA compile for it
without one (`sweeps.accel.gpu_aot`); a card without one (a100) is priced, not compiled for.
"""

import dataclasses
import math
import re

import jax

from chinchax.errors import UserError

GiB = 1 << 30

GPUS_PER_NODE = 8


@dataclasses.dataclass(frozen=True)
class Gpu:
  """One GPU model: what targets and jax call it, its memory and peak, its XLA spec."""
  name: str                 # the name targets use: h100
  kind: str                 # a substring of jax's Device.device_kind: "H100"
  hbm_bytes: int            # device memory, the spec's device_memory_size
  peak_flops: float         # dense bf16
  target_config: str | None  # sweeps/accel/gpu_targets/<file>: XLA's spec, to compile without it


GPUS: dict[str, Gpu] = {g.name: g for g in (
    Gpu("h100", "H100", 84_942_979_072, 989e12, "h100_sxm.txtpb"),  # H100 SXM 80 GB
    Gpu("h200", "H200", 151_397_597_184, 989e12, "h200.txtpb"),     # H200 141 GB
    Gpu("a100", "A100", 85_899_345_920, 312e12, None),               # A100 SXM 80 GB
)}
# a substring of the device kind -> dense bf16 FLOP/s per device
PEAK_BF16_FLOPS = {g.kind: g.peak_flops for g in GPUS.values()}


def gpu_for_kind(device_kind: str) -> Gpu | None:
  return next((g for g in GPUS.values() if g.kind.lower() in device_kind.lower()), None)


@dataclasses.dataclass(frozen=True)
class Chip:
  """One TPU generation: what jax calls it, its memory and peak, and its cloud names."""
  family: str           # the name targets use: v4, v5p, v5e, v6e
  device_kind: str      # jax's Device.device_kind (one device per chip: megacore on v4/v5p)
  hbm_bytes: int        # usable HBM per chip, as the compiler reports it
  peak_flops: float     # dense bf16 per chip
  dims: int             # 3: a 3D torus (v4, v5p); 2: a 2D mesh (v5e, v6e)
  cores_per_chip: int   # what the number of a gcloud accelerator type counts per chip
  gcloud: str           # the family in gcloud accelerator types
  gke_accelerator: str  # GKE's node label cloud.google.com/gke-tpu-accelerator ("": none)
  runtime: str          # the TPU VM software version that runs JAX on it
  multislice: bool      # its slices can join over the data-centre network
  host_chips: int = 4   # chips on one TPU VM (v5e/v6e: up to 8 in a one-host slice)

  def hosts(self, n_chips: int) -> int:
    """TPU VMs (GKE nodes) of a slice of `n_chips`: 4 chips a host beyond one host."""
    return 1 if n_chips <= self.host_chips else n_chips // 4


TPU_CHIPS: dict[str, Chip] = {c.family: c for c in (
    # v2 and v3: HBM as specified (8 and 16 GiB a TensorCore), not measured by a compiler.
    Chip("v2", "TPU v2", 16 * GiB, 45e12, 2, 2, "v2", "", "tpu-ubuntu2204-base", False),
    Chip("v3", "TPU v3", 32 * GiB, 123e12, 2, 2, "v3", "", "tpu-ubuntu2204-base", False),
    Chip("v4", "TPU v4", int(30.75 * GiB), 275e12, 3, 2, "v4", "tpu-v4-podslice",
         "tpu-ubuntu2204-base", True),
    Chip("v5p", "TPU v5", int(95.74 * GiB), 459e12, 3, 2, "v5p", "tpu-v5p-slice",
         "v2-alpha-tpuv5", True),
    Chip("v5e", "TPU v5 lite", int(15.75 * GiB), 197e12, 2, 1, "v5litepod",
         "tpu-v5-lite-podslice", "v2-alpha-tpuv5-lite", True, host_chips=8),
    Chip("v6e", "TPU v6 lite", int(31.25 * GiB), 918e12, 2, 1, "v6e", "tpu-v6e-slice",
         "v2-alpha-tpuv6e", True, host_chips=8),
)}
_BY_GCLOUD = {c.gcloud: c for c in TPU_CHIPS.values()}


def chip_of_gcloud(family: str) -> Chip | None:
  """The chip of a gcloud accelerator family (v5p, v5litepod, v6e, ...), or None."""
  return _BY_GCLOUD.get(family)
_BY_KIND = {c.device_kind.lower(): c for c in TPU_CHIPS.values()}
_BY_KIND.update({"tpu v5p": TPU_CHIPS["v5p"], "tpu v5e": TPU_CHIPS["v5e"],
                 "tpu v6e": TPU_CHIPS["v6e"]})


def peak_flops(device: jax.Device | None = None) -> float | None:
  """Dense bf16 FLOP/s of one device, None where no fair peak is known (CPU)."""
  device = device or jax.devices()[0]
  kind = getattr(device, "device_kind", "").lower()
  if kind in _BY_KIND:
    return _BY_KIND[kind].peak_flops
  for name, peak in PEAK_BF16_FLOPS.items():
    if name.lower() in kind:
      return peak
  return None


def record(mesh: jax.sharding.Mesh) -> dict:
  """The hardware facts of a run on `mesh`, for its result.json (JSON-ready)."""
  device = mesh.devices.flat[0]
  peak = peak_flops(device)
  return {
      "backend": device.platform, "device_kind": device.device_kind,
      "device_count": int(mesh.size), "process_count": jax.process_count(),
      "mesh": {k: int(v) for k, v in mesh.shape.items()},
      "peak_flops_per_device": peak,
      "peak_flops_reason": None if peak else (
          f"no dense bf16 peak is known for {device.platform} device "
          f"{device.device_kind!r}, so MFU is left empty"),
  }


# --------------------------------------------------------------------------- TPU targets


@dataclasses.dataclass(frozen=True)
class Target:
  """`slices` TPU slices of `topology` chips each."""
  chip: Chip
  topology: tuple[int, ...]
  slices: int = 1

  @property
  def chips_per_slice(self) -> int:
    return math.prod(self.topology)

  @property
  def chips(self) -> int:
    return self.chips_per_slice * self.slices

  @property
  def hosts_per_slice(self) -> int:
    """TPU VMs (GKE nodes) of one slice."""
    return self.chip.hosts(self.chips_per_slice)

  @property
  def chips_per_host(self) -> int:
    return self.chips_per_slice // self.hosts_per_slice

  @property
  def topology_name(self) -> str:
    return "x".join(map(str, self.topology))

  @property
  def name(self) -> str:
    base = f"{self.chip.family}:{self.topology_name}"
    return base if self.slices == 1 else f"{base},slices={self.slices}"

  @property
  def accelerator_type(self) -> str:
    """The gcloud accelerator type of one slice: v5p-32, v5litepod-16, v6e-8."""
    return f"{self.chip.gcloud}-{self.chips_per_slice * self.chip.cores_per_chip}"

  def libtpu_args(self) -> tuple[str, dict]:
    """(topology name, keyword arguments) for `jax.experimental.topologies.get_topology_desc`."""
    kw: dict = {"num_slices": self.slices}
    if self.chip.family == "v4":
      kw["chip_config_name"] = "megacore"  # one device per chip, as v5p has by default
    if self.chips_per_slice < 4:
      kw["chips_per_host_bounds"] = (*self.topology, 1)[:3] if self.chip.dims == 2 else (
          self.topology)
    return f"{self.chip.family}:{self.topology_name}", kw


def default_topology(chip: Chip, n_chips: int) -> tuple[int, ...]:
  """The topology gcloud gives a slice of `n_chips` (a power of two): 2x2x1 → 2x2x2 → 2x2x4 →
  2x4x4 → 4x4x4 ... on a 3D torus, 1x1, 2x2 → 2x4 → 4x4 → 4x8 ... on a 2D mesh; each step
  doubles the last of the smallest dimensions."""
  if n_chips < 1 or n_chips & (n_chips - 1):
    raise UserError(f"a {chip.family} slice of {n_chips} chips has no standard topology; "
                    f"give it as {chip.family}:AxB{'xC' if chip.dims == 3 else ''}")
  if n_chips == 1:
    return (1,) * chip.dims
  dims = [2, 2, 1][:chip.dims] if chip.dims == 3 else [2, 2]
  if n_chips < math.prod(dims):
    dims = [1, 2] if chip.dims == 2 else [1, 2, 1]
  while math.prod(dims) < n_chips:
    i = max(i for i, d in enumerate(dims) if d == min(dims))
    dims[i] *= 2
  return tuple(dims)


_TARGET = re.compile(r"([a-z0-9]+)([:-])([0-9x]+)(?:,slices=([0-9]+))?")
_GPU_NODE = re.compile(r"([a-z][0-9]+):([0-9]+)")


@dataclasses.dataclass(frozen=True)
class GpuNode:
  """`count` GPUs: one node of up to 8, or nodes of 8 joined over the network."""
  gpu: Gpu
  count: int

  @property
  def nodes(self) -> int:
    return -(-self.count // GPUS_PER_NODE)

  @property
  def gpus_per_node(self) -> int:
    return self.count // self.nodes

  @property
  def name(self) -> str:
    return f"{self.gpu.name}:{self.count}"

  @property
  def peak_flops(self) -> float:
    return self.gpu.peak_flops

  @property
  def topology(self) -> str:
    """jax's CUDA topology: slices x hosts (nodes) x devices per host."""
    return f"1x{self.nodes}x{self.gpus_per_node}"


def gpu_node(text: str) -> GpuNode | None:
  """The GPU node(s) of a target `h100:8`, `h100:16` (2 nodes of 8), else None."""
  m = _GPU_NODE.fullmatch(str(text).strip().lower())
  if not m or m.group(1) in TPU_CHIPS:
    return None
  if m.group(1) not in GPUS or int(m.group(2)) < 1:
    raise UserError(f"target {text!r}: a GPU node is NAME:COUNT with NAME one of "
                    f"{', '.join(GPUS)} (e.g. h100:8)")
  count = int(m.group(2))
  if count > GPUS_PER_NODE and count % GPUS_PER_NODE:
    raise UserError(f"target {text!r}: more than {GPUS_PER_NODE} GPUs are whole nodes of "
                    f"{GPUS_PER_NODE}; give a multiple of {GPUS_PER_NODE} (e.g. "
                    f"{m.group(1)}:{GPUS_PER_NODE * 2})")
  return GpuNode(GPUS[m.group(1)], count)


def parse_target(text: str) -> Target:
  """`v5p:2x2x4`, `v5e:4x4,slices=2` or a gcloud type `v5p-32`; UserError naming the forms."""
  m = _TARGET.fullmatch(str(text).strip().lower())
  forms = ("FAMILY:TOPOLOGY (v5p:2x2x4, v5e:4x4, v6e:2x2, v4:2x2x2) or a gcloud accelerator "
           "type (v5p-32, v5litepod-16, v6e-8), optionally with ,slices=K")
  if not m:
    raise UserError(f"target {text!r} is not a TPU slice; write it as {forms}")
  family, sep, size, slices = m.groups()
  chip = TPU_CHIPS.get(family) if sep == ":" else _BY_GCLOUD.get(family)
  if chip is None and family in GPUS:
    raise UserError(f"target {text!r}: a GPU node is NAME:COUNT, e.g. {family}:8 (one node) "
                    f"or {family}:16 (two nodes of 8)")
  if chip is None:
    known = ", ".join(TPU_CHIPS) if sep == ":" else ", ".join(_BY_GCLOUD)
    raise UserError(f"target {text!r}: unknown TPU family {family!r}; one of {known}")
  slices = int(slices or 1)
  if slices < 1:
    raise UserError(f"target {text!r}: slices must be at least 1")
  if sep == "-":
    if not size.isdigit() or int(size) % chip.cores_per_chip:
      raise UserError(f"target {text!r}: {chip.gcloud}-N counts "
                      f"{'TensorCores, 2 a chip' if chip.cores_per_chip == 2 else 'chips'}")
    return Target(chip, default_topology(chip, int(size) // chip.cores_per_chip), slices)
  dims = tuple(int(d) for d in size.split("x") if d)
  if len(dims) != chip.dims or min(dims) < 1 or len(size.split("x")) != chip.dims:
    raise UserError(f"target {text!r}: a {family} topology has {chip.dims} dimensions, "
                    f"e.g. {family}:{'2x2x2' if chip.dims == 3 else '2x2'}")
  return Target(chip, dims, slices)
