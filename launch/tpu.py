"""Run a sweep on a Cloud TPU VM, a pod slice, or several slices (Multislice).

    python -m chinchax.launch.tpu ACTION --name=NAME --project=P --zone=Z [--accelerator=v5p-32]
        [--spot | --best-effort] [--reserved] [--node-count=K] [--runtime-version=V] [--check]
        [--repo=URL [--ref=REF] | --wheel=PATH] [--dest=DIR] [--env=KEY=VALUE ...]
        [--config=PATH[:ARG] [--config.KEY=VALUE ...]] [--workdir=gs://BUCKET/PATH] [--dry-run]

ACTION: `up` creates the slice through a queued resource, waits until it is ACTIVE, installs
`chinchax[tpu,gcs]` on every worker and starts the sweep on every worker (with `--check`, it
first compiles every cell for the slice here and stops if one does not fit); `logs` follows
worker 0's log until the sweep ends; `fetch` copies the workdir here; `down` deletes the slice;
`all` is up, logs, fetch and down in turn.

A slice of `v5p-32` has 32 TensorCores = 16 chips = 4 hosts (v2-v5p: 8 cores a host;
v5litepod/v6e count chips, 4 a host beyond 8). Every host runs the same command; chinchax calls
`jax.distributed.initialize()`, which finds the other hosts from the TPU metadata. Hosts share
no disk, so a workdir on more than one host must be `gs://`. With `--node-count=K > 1` the queued
resource holds K slices NAME-0..NAME-{K-1} (Multislice); the TPU runtime sets the MEGASCALE_*
variables (coordinator, number of slices, slice id) on every host, so the command is unchanged.
`--best-effort` exists only in `gcloud alpha`, which it then uses.
"""

import dataclasses
import os
import re
import shlex
import sys
from collections.abc import Sequence

if __package__ in (None, ""):  # `python launch/tpu.py`: make the checkout importable.
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chinchax.launch import steps  # noqa: E402
from chinchax.scaling.errors import UserError  # noqa: E402
from chinchax.sweeps import configs  # noqa: E402
from chinchax.sweeps import hardware  # noqa: E402

RUN_DIR = "chinchax-run"  # on each worker, in the login home: config, log, pid, exit status
ACTIONS = ("up", "logs", "fetch", "down", "all")

# family -> (number after the dash counts: "cores" | "chips", runtime for JAX, multislice ok)
_FAMILIES = {
    "v2": ("cores", "tpu-ubuntu2204-base", False),
    "v3": ("cores", "tpu-ubuntu2204-base", False),
    "v4": ("cores", "tpu-ubuntu2204-base", True),
    "v5p": ("cores", "v2-alpha-tpuv5", True),
    "v5litepod": ("chips", "v2-alpha-tpuv5-lite", True),
    "v6e": ("chips", "v2-alpha-tpuv6e", True),
}
_ALIASES = {"v5e": "v5litepod", "v5lite": "v5litepod", "v6": "v6e", "v5": "v5p"}
_TYPE = re.compile(r"([a-z0-9]+)-([0-9]+)")
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_POLL_S = 30.0


@dataclasses.dataclass(frozen=True)
class Accelerator:
  family: str
  size: int

  @property
  def name(self) -> str:
    return f"{self.family}-{self.size}"

  @property
  def hosts(self) -> int:
    """Hosts (TPU VMs) in one slice."""
    if _FAMILIES[self.family][0] == "cores":  # 4 chips x 2 TensorCores a host
      return max(1, self.size // 8)
    return 1 if self.size <= 8 else self.size // 4  # 8 chips on one host, else 4 a host

  @property
  def runtime(self) -> str:
    return _FAMILIES[self.family][1]


def accelerator(text: str) -> Accelerator:
  m = _TYPE.fullmatch(text)
  family = m.group(1) if m else ""
  if m and family in _ALIASES:
    raise UserError(f"unknown accelerator type {text!r}: gcloud calls it "
                    f"{_ALIASES[family]}-{m.group(2)}")
  if not m or family not in _FAMILIES:
    raise UserError(f"unknown accelerator type {text!r}: use FAMILY-SIZE with FAMILY one of "
                    f"{', '.join(_FAMILIES)} (e.g. v5p-32, v5litepod-16, v6e-8)")
  size = int(m.group(2))
  counts = _FAMILIES[family][0]
  ok = size % 8 == 0 if counts == "cores" else size in (1, 4, 8) or size % 16 == 0
  if size == 0 or not ok:
    rule = "a multiple of 8 TensorCores" if counts == "cores" else "1, 4, 8 or a multiple of 16"
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


def install_command(requirement: str, dirs: Sequence[str]) -> str:
  """Shell command for every worker: the run folders, then chinchax with its `tpu` extra
  (jax[tpu]: the libtpu built for that jax) and `gcs` extra."""
  mkdir = shlex.join(["mkdir", "-p", *dirs])
  pip = ["python3", "-m", "pip", "install", "--quiet"]
  return " && ".join([mkdir, shlex.join([*pip, requirement])])


# ---------------------------------------------------------------------------- plan


@dataclasses.dataclass(frozen=True)
class Sweep:
  """What runs on the workers and how chinchax gets there."""
  config: str | None
  overrides: tuple[str, ...]
  workdir: str
  env: tuple[tuple[str, str], ...] = ()
  repo: str | None = None
  ref: str = "main"
  wheel: str | None = None
  check: bool = False  # compile every cell for the slice here before creating it
  tokenizer: str | None = None  # a local SentencePiece model every worker needs


TOKENIZER_DIR = "tokenizer"


def _requirement(sw: Sweep) -> str:
  # tpu: jax with its libtpu; gcs: hosts share no disk, so a multi-host workdir is gs://.
  if sw.wheel:
    return f"./{os.path.basename(sw.wheel)}[tpu,gcs]"
  url = sw.repo if sw.repo.startswith("git+") else f"git+{sw.repo}"
  return f"chinchax[tpu,gcs] @ {url}@{sw.ref}"


def up_steps(s: Slice, sw: Sweep) -> list[steps.Step]:
  config_path = steps.shipped(sw.config)
  dirs = [RUN_DIR] + ([f"{RUN_DIR}/{os.path.dirname(config_path)}"]
                      if config_path and os.path.dirname(config_path) else [])
  overrides = list(sw.overrides)
  if sw.tokenizer:  # the same file on every worker, where the sweep (run in RUN_DIR) finds it
    remote = f"{TOKENIZER_DIR}/{os.path.basename(sw.tokenizer)}"
    dirs.append(f"{RUN_DIR}/{TOKENIZER_DIR}")
    overrides.append(f"--config.train.data.spm_model={remote}")
  out = []
  if sw.check:
    target = s.target.name
    out.append(steps.step(
        f"compile every cell for {target} here (refuses cells that do not fit)",
        [*steps.sweep_argv(sys.executable, sw.config, sw.overrides, None), "--dry-run",
         f"--compile={target}"]))
  out += [
      steps.step(f"request {s.accelerator.name} x{s.node_count} ({s.hosts} hosts) "
                 f"as queued resource {s.name}", create_argv(s)),
      steps.step("wait until the queued resource is ACTIVE", state_argv(s), until=("ACTIVE",),
                 fail_on=("FAILED", "SUSPENDING", "SUSPENDED"), every_s=_POLL_S),
  ]
  if sw.wheel:
    out.append(steps.step("copy the chinchax wheel to every worker",
                          scp_to_all_argv(s, sw.wheel, "")))
  out.append(steps.step("install chinchax[tpu,gcs] on every worker",
                        ssh_argv(s, install_command(_requirement(sw), dirs))))
  if config_path:
    out.append(steps.step("copy the sweep config to every worker",
                          scp_to_all_argv(s, config_path, f"{RUN_DIR}/{config_path}")))
  if sw.tokenizer:
    out.append(steps.step("copy the SentencePiece model to every worker",
                          scp_to_all_argv(s, sw.tokenizer, f"{RUN_DIR}/{remote}")))
  sweep = steps.env_argv(dict(sw.env)) + steps.sweep_argv("python3", sw.config, overrides,
                                                          sw.workdir)
  out.append(steps.step("start the sweep on every worker (survives the ssh session)",
                        ssh_argv(s, steps.remote_start(RUN_DIR, sweep))))
  return out


def logs_step(s: Slice) -> steps.Step:
  return steps.step("follow worker 0's log until the sweep ends",
                    ssh_argv(s, steps.remote_follow(RUN_DIR), worker="0"))


def fetch_step(s: Slice, workdir: str, dest: str) -> steps.Step:
  return steps.step(f"copy {workdir} to {dest}", fetch_argv(s, workdir, dest))


def delete_step(s: Slice) -> steps.Step:
  return steps.step(f"delete queued resource {s.name} and its TPU VMs", delete_argv(s))


def make_plan(action: str, s: Slice, sw: Sweep | None, dest: str = ".") -> steps.Plan:
  parts = {
      "up": lambda: up_steps(s, sw),
      "logs": lambda: [logs_step(s)],
      "fetch": lambda: [fetch_step(s, sw.workdir, dest)],
      "down": lambda: [delete_step(s)],
      "all": lambda: up_steps(s, sw) + [logs_step(s), fetch_step(s, sw.workdir, dest),
                                        delete_step(s)],
  }
  return steps.Plan(tuple(parts[action]()))


# ---------------------------------------------------------------------------- flags


def _parser() -> steps.Parser:
  p = steps.Parser(prog="python -m chinchax.launch.tpu", description=__doc__.split("\n\n")[0])
  p.add_argument("action", choices=ACTIONS)
  p.add_argument("--name", required=True, help="queued resource (and node) name")
  p.add_argument("--project", help="Google Cloud project")
  p.add_argument("--zone", help="zone, e.g. us-east5-a")
  p.add_argument("--accelerator", help="accelerator type, e.g. v5p-32, v5litepod-16, v6e-8")
  p.add_argument("--runtime-version", help="TPU software version (default: by family)")
  p.add_argument("--node-count", type=int, default=1, help="slices (Multislice when > 1)")
  tier = p.add_mutually_exclusive_group()
  tier.add_argument("--spot", action="store_true", help="Spot VMs (preemptible)")
  tier.add_argument("--best-effort", action="store_true", help="best-effort (gcloud alpha)")
  p.add_argument("--reserved", action="store_true", help="use the project's reservation")
  src = p.add_mutually_exclusive_group()
  src.add_argument("--repo", help="git URL pip installs chinchax from on the workers")
  p.add_argument("--ref", default="main", help="git ref for --repo (default: main)")
  src.add_argument("--wheel", help="a chinchax wheel built here, copied to the workers")
  p.add_argument("--dest", default=".", help="where `fetch` copies the workdir (default: .)")
  p.add_argument("--check", action="store_true", help="before creating the slice, compile "
                 "every cell for it here (needs libtpu: pip install 'chinchax[tpu]')")
  steps.add_sweep_flags(p)
  return p


def _need(args, *flags: str) -> None:
  missing = [f"--{f.replace('_', '-')}" for f in flags if not getattr(args, f)]
  if missing:
    raise UserError(f"{args.action} needs {' and '.join(missing)}")


def build(argv: Sequence[str]) -> tuple[steps.Plan, bool]:
  args, overrides = steps.parse(_parser(), argv)
  _need(args, "project", "zone")
  if not _NAME.fullmatch(args.name):
    raise UserError(f"--name={args.name!r}: use lowercase letters, digits and '-', starting "
                    f"with a letter (at most 63)")
  if args.node_count < 1:
    raise UserError(f"--node-count={args.node_count}: need at least 1 slice")
  acc = None
  if args.action in ("up", "all"):
    _need(args, "accelerator", "workdir")
    acc = accelerator(args.accelerator)
    if args.node_count > 1 and not _FAMILIES[acc.family][2]:
      raise UserError(f"{acc.family} has no Multislice: use --node-count=1 or v4 or later")
    if not (args.repo or args.wheel):
      raise UserError("say how to install chinchax on the workers: --repo=GIT_URL [--ref=REF] "
                      "or --wheel=PATH (python -m pip wheel --no-deps -w dist .)")
    if args.config and os.path.isabs(args.config):
      raise UserError(f"--config={args.config}: give the path relative to the checkout root")
    if args.wheel and not args.wheel.endswith(".whl"):
      raise UserError(f"--wheel={args.wheel}: not a wheel (*.whl)")
    named = (args.config or "").partition(":")[0] in configs.NAMES  # installed on the workers
    for path in [args.wheel, None if named else args.config and args.config.partition(":")[0]]:
      if path and not os.path.isfile(path):
        raise UserError(f"{path} not found: it is copied to the workers from here")
  elif args.action == "fetch":
    _need(args, "workdir")
  s = Slice(args.name, args.project, args.zone, acc, args.runtime_version, args.node_count,
            args.spot, args.best_effort, args.reserved)
  if args.workdir and not args.workdir.startswith("gs://") and (s.hosts > 1 or s.node_count > 1):
    what = f"{acc.name} x{s.node_count} has {s.hosts} hosts" if acc else "several slices have hosts"
    raise UserError(f"--workdir={args.workdir}: {what} that share no disk; use a "
                    f"gs://bucket/path workdir")
  sw = None
  if args.workdir:
    tokenizer = None
    if args.action in ("up", "all"):  # the sweep's own checks, before the slice is paid for
      tokenizer = steps.tokenizer_file(steps.validate_sweep(args.config, overrides))
    sw = Sweep(args.config, tuple(overrides), args.workdir,
               tuple(steps.parse_env(args.env).items()), args.repo, args.ref, args.wheel,
               args.check, tokenizer)
  return make_plan(args.action, s, sw, args.dest), args.dry_run


def main(argv: Sequence[str] | None = None) -> int:
  return steps.cli("chinchax.launch.tpu", build, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
  sys.exit(main())
