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
from chinchax.launch.tpu_slice import (  # noqa: E402
    RUN_DIR, Slice, accelerator, create_argv, delete_argv, fetch_argv,
    scp_to_all_argv, ssh_argv, state_argv)
from chinchax.errors import UserError  # noqa: E402
from chinchax.sweeps import configs  # noqa: E402

ACTIONS = ("up", "logs", "fetch", "down", "all")
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_POLL_S = 30.0


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
    if args.node_count > 1 and not acc.multislice:
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
