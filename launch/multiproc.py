"""A multi-host job on this machine: P processes of K CPU devices each, joined by jax.distributed.

    python -m chinchax.launch.multiproc [--processes=2] [--devices=2] [--port=0] -- \\
        chinchax train --config=train.py:tiny --workdir=/tmp/mh

starts P copies of the command, each with the environment a TPU pod's or a GPU cluster's
launcher gives its hosts (JAX_COORDINATOR_ADDRESS=127.0.0.1:PORT, JAX_NUM_PROCESSES=P,
JAX_PROCESS_ID=0..P-1), K CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=K) and
gloo for the collectives across processes (JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo). Each line
of output is prefixed with its process (`[1] ...`). SIGTERM or SIGINT to this launcher is
passed on to every process, as a pod's preemption does; `kill -TERM` of one process's pid
(printed at the start) is a maintenance event on one host. The launcher exits with process
0's status, or the first non-zero one when process 0 succeeded. --dry-run prints each
process's command line with its environment instead, to start by hand in P terminals.
"""

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence


def free_port() -> int:
  """A loopback port nothing listens on now (the coordinator binds it a moment later)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def process_env(rank: int, processes: int, devices: int, port: int,
                base: dict[str, str] | None = None) -> dict[str, str]:
  """The environment of process `rank`: what the launchers set on each host, on loopback."""
  env = dict(os.environ if base is None else base)
  flags = [f for f in env.get("XLA_FLAGS", "").split()
           if not f.startswith("--xla_force_host_platform_device_count")]
  env.update({
      "JAX_PLATFORMS": "cpu", "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
      "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": str(processes),
      "JAX_PROCESS_ID": str(rank),
      "XLA_FLAGS": " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])})
  return env


def start(argv: Sequence[str], processes: int, devices: int, port: int = 0, *,
          env: dict[str, str] | None = None, stdout=None, stderr=None, cwd=None,
          overrides=None) -> list[subprocess.Popen]:
  """Starts the P processes in one new process group (the first one's), so that the whole job
  can be signalled or killed at once: `os.killpg(procs[0].pid, sig)`. `argv` may be a
  function of the rank (a test's processes that disagree); `overrides(rank)`, variables set
  over a process's environment (a test's processes started wrongly: JAX_PROCESS_ID, ...)."""
  port = port or free_port()
  procs: list[subprocess.Popen] = []
  for rank in range(processes):
    group = {"process_group": procs[0].pid if procs else 0}  # same session, own group
    env_r = {**process_env(rank, processes, devices, port, env),
             **(overrides(rank) if overrides else {})}
    procs.append(subprocess.Popen(
        list(argv(rank) if callable(argv) else argv), env=env_r, cwd=cwd, text=True,
        stdin=subprocess.DEVNULL,
        stdout=stdout(rank) if callable(stdout) else stdout,
        stderr=stderr(rank) if callable(stderr) else stderr, **group))
  return procs


def _relay(rank: int, stream, out) -> None:
  for line in stream:
    out.write(f"[{rank}] {line}")
    out.flush()


def main(argv: Sequence[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m chinchax.launch.multiproc",
                              description=__doc__.split("\n\n")[0])
  p.add_argument("--processes", type=int, default=2, help="processes (hosts) in the job")
  p.add_argument("--devices", type=int, default=2, help="CPU devices per process")
  p.add_argument("--port", type=int, default=0, help="the coordinator's port (0: a free one)")
  p.add_argument("--dry-run", action="store_true",
                 help="print each process's command line (to run by hand, one per terminal)")
  p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command each runs")
  args = p.parse_args(sys.argv[1:] if argv is None else argv)
  command = args.command[1:] if args.command[:1] == ["--"] else args.command
  if not command or args.processes < 1 or args.devices < 1:
    p.print_usage(sys.stderr)
    print(f"{p.prog}: error: give --processes and --devices >= 1 and a command after --",
          file=sys.stderr)
    return 2
  if args.dry_run:
    port = args.port or free_port()
    for rank in range(args.processes):
      env = process_env(rank, args.processes, args.devices, port, base={})
      print(shlex.join([f"{k}={v}" for k, v in sorted(env.items())] + command))
    return 0
  if command[0] == "chinchax":  # the console script of the interpreter that runs this
    command = [sys.executable, "-m", "chinchax.cli", *command[1:]]
  procs = start(command, args.processes, args.devices, args.port,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  print(f"started {args.processes} processes x {args.devices} CPU devices: pids "
        f"{' '.join(str(q.pid) for q in procs)}; {shlex.join(command)}", flush=True)
  relays = [threading.Thread(target=_relay, args=(r, q.stdout, sys.stdout), daemon=True)
            for r, q in enumerate(procs)]
  for t in relays:
    t.start()

  def forward(signum, _frame):
    for q in procs:
      if q.poll() is None:
        q.send_signal(signum)
  for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, forward)
  codes = [q.wait() for q in procs]
  for t in relays:
    t.join(timeout=5)
  codes = [c if c >= 0 else 128 - c for c in codes]  # killed by signal N: 128 + N, as a shell
  return codes[0] or next((c for c in codes if c), 0)


if __name__ == "__main__":
  sys.exit(main())
