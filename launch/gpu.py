"""Run a sweep on GPU hosts: this machine, or one process per host over ssh.

    python -m chinchax.launch.gpu [--hosts=HOST[,HOST...]] [--coordinator=ADDR:PORT] [--port=1234]
        [--mem-fraction=0.9] [--xla-flags=FLAGS] [--remote-dir=DIR] [--python=PY]
        [--shared-workdir] [--detach] [--env=KEY=VALUE ...]
        [--config=PATH[:ARG] [--config.KEY=VALUE ...]] [--workdir=DIR] [--dry-run]

Without --hosts the sweep runs here, in the foreground. With --hosts each host runs one
process that owns all of that host's GPUs, started over ssh in --remote-dir (a checkout with
chinchax installed, default ~/chinchax) so that it survives the session; then host 0's log is
followed until the sweep ends (unless --detach).

Every process gets
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.9  JAX preallocates 75% of each GPU by default; the process
      is alone on its GPUs, so give XLA 90% and leave the rest to the CUDA context, cuBLAS/cuDNN
      workspaces and NCCL buffers, which live outside XLA's pool.
  XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true  lets XLA schedule collectives
      (gradient all-reduce, parameter all-gather) asynchronously so they overlap with compute.
  A resume continues the same losses to the bit only with
  --xla-flags=--xla_gpu_deterministic_ops=true (XLA's GPU kernels may add in any order; one
  H200 trained a 0.49M model 27% slower with it), so it is not set for you.
and, on more than one host, the process group that `jax.distributed.initialize()` needs:
  JAX_COORDINATOR_ADDRESS=HOST0:PORT (the same everywhere), JAX_NUM_PROCESSES=n and
  JAX_PROCESS_ID=0..n-1 (one per host, in --hosts order; process 0 writes the shared files).
jax (0.10) reads only JAX_COORDINATOR_ADDRESS itself; the sweep reads the other two and
passes them to `jax.distributed.initialize(num_processes=..., process_id=...)`.
Hosts share no disk unless you say so: a multi-host workdir is gs://, or a path on a filesystem
every host mounts (--shared-workdir).
"""

import os
import shlex
import sys
from collections.abc import Sequence

if __package__ in (None, ""):  # `python launch/gpu.py`: make the checkout importable.
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from chinchax.launch import steps  # noqa: E402
from chinchax.errors import UserError  # noqa: E402

MEM_FRACTION = 0.9
XLA_FLAGS = ("--xla_gpu_enable_latency_hiding_scheduler=true",)


def host_env(mem_fraction: float = MEM_FRACTION, xla_flags: str = "") -> dict[str, str]:
  """What every GPU process gets, single host or not (see the module docstring for why)."""
  return {"XLA_PYTHON_CLIENT_MEM_FRACTION": f"{mem_fraction:g}",
          "XLA_FLAGS": " ".join([*XLA_FLAGS, *xla_flags.split()])}


def process_env(coordinator: str, n: int, i: int) -> dict[str, str]:
  return {"JAX_COORDINATOR_ADDRESS": coordinator, "JAX_NUM_PROCESSES": str(n),
          "JAX_PROCESS_ID": str(i)}


def local_plan(sweep: Sequence[str], env: dict[str, str]) -> steps.Plan:
  return steps.Plan((steps.step("run the sweep on this host's GPUs",
                                [*steps.env_argv(env), *sweep]),))


def hosts_plan(hosts: Sequence[str], sweep: Sequence[str], env: dict[str, str], *,
               coordinator: str, remote_dir: str, follow: bool = True,
               files: Sequence[tuple[str, str]] = ()) -> steps.Plan:
  """One detached process per host over ssh; process i on hosts[i]; then follow host 0.
  `files`: (local path, path under remote_dir) copied to every host first (the config file,
  the SentencePiece model)."""
  n = len(hosts)
  out = []
  for host in hosts:
    for local, remote in files:
      target = f"{remote_dir}/{remote}"
      out.append(steps.step(f"make {os.path.dirname(target)} on {host}", [
          "ssh", host, f"mkdir -p {shlex.quote(os.path.dirname(target))}"]))
      out.append(steps.step(f"copy {local} to {host}", ["scp", local, f"{host}:{target}"]))
  for i, host in enumerate(hosts):
    env_i = {**env, **process_env(coordinator, n, i)} if n > 1 else env
    command = steps.remote_start(remote_dir, [*steps.env_argv(env_i), *sweep])
    out.append(steps.step(f"start JAX process {i} of {n} on {host}", ["ssh", host, command]))
  if follow:
    out.append(steps.step(f"follow {hosts[0]}'s log until the sweep ends",
                          ["ssh", hosts[0], steps.remote_follow(remote_dir)]))
  return steps.Plan(tuple(out))


def _parser() -> steps.Parser:
  p = steps.Parser(prog="python -m chinchax.launch.gpu", description=__doc__.split("\n\n")[0])
  p.add_argument("--hosts", default="", help="comma-separated ssh hosts; none: this machine")
  p.add_argument("--coordinator", help="ADDR:PORT of process 0 as the others reach it "
                 "(default: first host and --port)")
  p.add_argument("--port", type=int, default=1234, help="coordinator port (default: 1234)")
  p.add_argument("--mem-fraction", type=float, default=MEM_FRACTION,
                 help=f"XLA_PYTHON_CLIENT_MEM_FRACTION (default: {MEM_FRACTION:g})")
  p.add_argument("--xla-flags", default="", help="more XLA_FLAGS, appended")
  p.add_argument("--remote-dir", default="chinchax",
                 help="checkout with chinchax installed, on every host (default: ~/chinchax)")
  p.add_argument("--python", help="interpreter with chinchax (default: this one here, "
                 "python3 on hosts)")
  p.add_argument("--shared-workdir", action="store_true",
                 help="the workdir is on a filesystem every host mounts")
  p.add_argument("--detach", action="store_true", help="start the hosts, do not follow")
  steps.add_sweep_flags(p)
  return p


def build(argv: Sequence[str]) -> tuple[steps.Plan, bool]:
  args, overrides = steps.parse(_parser(), argv)
  if not 0 < args.mem_fraction <= 1:
    raise UserError(f"--mem-fraction={args.mem_fraction}: must be in (0, 1]")
  env = {**host_env(args.mem_fraction, args.xla_flags), **steps.parse_env(args.env)}
  hosts = [h for h in args.hosts.split(",") if h]
  if not hosts:
    steps.validate_sweep(args.config, overrides)
    sweep = steps.sweep_argv(args.python or sys.executable, args.config, overrides,
                             args.workdir)
    return local_plan(sweep, env), args.dry_run
  if len(set(hosts)) != len(hosts):
    raise UserError(f"--hosts={args.hosts}: a host is listed twice; one process per host")
  if len(hosts) > 1:
    if not args.workdir:
      raise UserError("several hosts need --workdir=gs://BUCKET/PATH (or a shared path with "
                      "--shared-workdir)")
    if not (args.workdir.startswith("gs://") or args.shared_workdir):
      raise UserError(f"--workdir={args.workdir}: {len(hosts)} hosts share no disk; use "
                      f"gs://BUCKET/PATH, or --shared-workdir if every host mounts it")
  coordinator = args.coordinator or f"{hosts[0].rpartition('@')[2]}:{args.port}"
  if not coordinator.rpartition(":")[2].isdigit():
    raise UserError(f"--coordinator={coordinator}: write it as ADDR:PORT")
  files = []
  config_file = steps.shipped(args.config)
  if config_file:
    if os.path.isabs(config_file):
      raise UserError(f"--config={args.config}: give the path relative to the checkout root")
    files.append((config_file, config_file))
  spm = steps.tokenizer_file(steps.validate_sweep(args.config, overrides))
  if spm:  # the same file on every host, where the sweep (run in --remote-dir) finds it
    files.append((spm, f"tokenizer/{os.path.basename(spm)}"))
    overrides = [*overrides, f"--config.train.data.spm_model=tokenizer/{os.path.basename(spm)}"]
  sweep = steps.sweep_argv(args.python or "python3", args.config, overrides, args.workdir)
  return hosts_plan(hosts, sweep, env, coordinator=coordinator, remote_dir=args.remote_dir,
                    follow=not args.detach, files=files), args.dry_run


def main(argv: Sequence[str] | None = None) -> int:
  return steps.cli("chinchax.launch.gpu", build, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
  sys.exit(main())
