"""A Cloud TPU slice as gcloud names it (accelerator types, their hosts and runtimes), and the
gcloud commands that create, reach and delete it: launch/tpu.py builds a sweep's plan from
them. A queued resource holds one slice (node id = its name) or, with `node_count` K > 1, K
slices NAME-0..NAME-{K-1} (Multislice), reached with `queued-resources ssh/scp --node=...`.
"""

import dataclasses
import re

from chinchax.errors import UserError
from chinchax.sweeps.chips import hardware

RUN_DIR = "chinchax-run"  # on each worker, in the login home: config, log, pid, exit status

# Each family's facts (TensorCores a chip, hosts, runtime, Multislice) are the chip table's,
# sweeps/chips/hardware.py; gcloud's names for them:
_ALIASES = {"v5e": "v5litepod", "v5lite": "v5litepod", "v6": "v6e", "v5": "v5p"}
_TYPE = re.compile(r"([a-z0-9]+)-([0-9]+)")


@dataclasses.dataclass(frozen=True)
class Accelerator:
  family: str
  size: int

  @property
  def name(self) -> str:
    return f"{self.family}-{self.size}"

  @property
  def chip(self) -> hardware.Chip:
    return hardware.chip_of_gcloud(self.family)

  @property
  def hosts(self) -> int:
    """Hosts (TPU VMs) in one slice."""
    return self.chip.hosts(self.size // self.chip.cores_per_chip)

  @property
  def runtime(self) -> str:
    return self.chip.runtime

  @property
  def multislice(self) -> bool:
    return self.chip.multislice


def accelerator(text: str) -> Accelerator:
  m = _TYPE.fullmatch(text)
  family = m.group(1) if m else ""
  if m and family in _ALIASES:
    raise UserError(f"unknown accelerator type {text!r}: gcloud calls it "
                    f"{_ALIASES[family]}-{m.group(2)}")
  chip = hardware.chip_of_gcloud(family) if m else None
  if chip is None:
    families = ", ".join(c.gcloud for c in hardware.TPU_CHIPS.values())
    raise UserError(f"unknown accelerator type {text!r}: use FAMILY-SIZE with FAMILY one of "
                    f"{families} (e.g. v5p-32, v5litepod-16, v6e-8)")
  size = int(m.group(2))
  cores = chip.cores_per_chip > 1  # the number counts TensorCores, else chips
  ok = size % 8 == 0 if cores else size in (1, 4, 8) or size % 16 == 0
  if size == 0 or not ok:
    rule = "a multiple of 8 TensorCores" if cores else "1, 4, 8 or a multiple of 16"
    raise UserError(f"accelerator type {text!r} has no such size: {family} sizes are {rule}")
  return Accelerator(family, size)


@dataclasses.dataclass(frozen=True)
class Slice:
  """A queued resource: one slice (node id = name) or `node_count` slices name-0, name-1, ..."""
  name: str
  project: str
  zone: str
  accelerator: Accelerator | None = None
  runtime_version: str | None = None
  node_count: int = 1
  spot: bool = False
  best_effort: bool = False
  reserved: bool = False

  @property
  def hosts(self) -> int:
    return self.accelerator.hosts * self.node_count if self.accelerator else 0

  @property
  def target(self) -> hardware.Target:
    """The slices as a compile target (`chinchax sweep --dry-run --compile=...`)."""
    t = hardware.parse_target(self.accelerator.name)
    return dataclasses.replace(t, slices=self.node_count)

  @property
  def _where(self) -> list[str]:
    return [f"--project={self.project}", f"--zone={self.zone}"]


# ---------------------------------------------------------------------------- commands


def create_argv(s: Slice) -> list[str]:
  track = ["alpha"] if s.best_effort else []  # --best-effort is not in the GA track
  argv = ["gcloud", *track, "compute", "tpus", "queued-resources", "create", s.name, *s._where,
          f"--accelerator-type={s.accelerator.name}",
          f"--runtime-version={s.runtime_version or s.accelerator.runtime}"]
  if s.node_count > 1:
    argv += [f"--node-count={s.node_count}", f"--node-prefix={s.name}"]
  else:
    argv.append(f"--node-id={s.name}")
  argv += ["--spot"] * s.spot + ["--best-effort"] * s.best_effort + ["--reserved"] * s.reserved
  return argv


def state_argv(s: Slice) -> list[str]:
  return ["gcloud", "compute", "tpus", "queued-resources", "describe", s.name, *s._where,
          "--format=value(state.state)"]


def ssh_argv(s: Slice, command: str, worker: str = "all") -> list[str]:
  """`command` on `worker` ("all" or an index) of every slice, or of slice 0 for one worker."""
  if s.node_count > 1:
    node = "all" if worker == "all" else "0"
    return ["gcloud", "compute", "tpus", "queued-resources", "ssh", s.name, *s._where,
            f"--node={node}", f"--worker={worker}", f"--command={command}"]
  return ["gcloud", "compute", "tpus", "tpu-vm", "ssh", s.name, *s._where,
          f"--worker={worker}", f"--command={command}"]


def scp_to_all_argv(s: Slice, local: str, remote: str) -> list[str]:
  if s.node_count > 1:
    return ["gcloud", "compute", "tpus", "queued-resources", "scp", local, f"{s.name}:{remote}",
            *s._where, "--node=all", "--worker=all"]
  return ["gcloud", "compute", "tpus", "tpu-vm", "scp", local, f"{s.name}:{remote}", *s._where,
          "--worker=all"]


def fetch_argv(s: Slice, workdir: str, dest: str) -> list[str]:
  if workdir.startswith("gs://"):
    return ["gcloud", "storage", "cp", "-r", workdir, dest]
  remote = workdir if workdir.startswith("/") else f"{RUN_DIR}/{workdir}"
  return ["gcloud", "compute", "tpus", "tpu-vm", "scp", f"{s.name}:{remote}", dest, "--recurse",
          *s._where, "--worker=0"]


def delete_argv(s: Slice) -> list[str]:
  return ["gcloud", "compute", "tpus", "queued-resources", "delete", s.name, *s._where,
          "--force", "--async", "--quiet"]
