"""What every launcher shares: a `Plan` of command steps, quoting, env, the sweep command.

A launcher never talks to a cloud API itself: it builds a `Plan` (steps, each a description
and one argv) and either prints it (`--dry-run`) or runs it step by step with subprocess. Every
argv is printed with `shlex.join`, so the printed line is exactly what runs and
`shlex.split(line) == argv`. Commands run on another machine are one shell string, built with
`shlex.join`/`shlex.quote` from argv lists; quoting is never done by hand.

A sweep on a remote host runs detached (SIGHUP ignored, as `nohup` does) with its output in
`chinchax-sweep.log`, its pid in `chinchax-sweep.pid` and its exit status in
`chinchax-sweep.exit` (all in the run directory), so it survives the ssh session that started
it and can be followed later.
"""

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TextIO

from chinchax import exit_codes
from chinchax.errors import UserError

LOG, PID, EXIT = "chinchax-sweep.log", "chinchax-sweep.pid", "chinchax-sweep.exit"

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class Step:
  """One command. With `until`, it is polled: rerun every `every_s` seconds until its stdout
  (stripped) is one of `until`; an output in `fail_on` fails the step."""
  description: str
  argv: tuple[str, ...]
  until: tuple[str, ...] = ()
  fail_on: tuple[str, ...] = ()
  every_s: float = 30.0

  @property
  def line(self) -> str:
    return shlex.join(self.argv)


@dataclasses.dataclass(frozen=True)
class Plan:
  steps: tuple[Step, ...]

  def render(self) -> str:
    return "\n".join(_render(i, len(self.steps), s) for i, s in enumerate(self.steps))


def step(description: str, argv: Iterable[str], **poll) -> Step:
  return Step(description, tuple(str(a) for a in argv), **poll)


def _render(i: int, n: int, s: Step) -> str:
  text = f"[{i + 1}/{n}] {s.description}\n  $ {s.line}"
  if s.until:
    text += f"\n    (every {s.every_s:g} s until it prints {' or '.join(s.until)})"
  return text


def execute(plan: Plan, *, dry_run: bool, out: TextIO | None = None,
            run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
            sleep: Callable[[float], None] = time.sleep) -> int:
  """Prints each step as it goes and runs it unless `dry_run`; stops at the first failure and
  prints the steps left, so that they can be run by hand. Returns an exit status."""
  out = out or sys.stdout
  n = len(plan.steps)
  for i, s in enumerate(plan.steps):
    print(_render(i, n, s), file=out, flush=True)
    if dry_run:
      continue
    rc = _poll(s, run, sleep, out) if s.until else run(list(s.argv)).returncode
    if rc != 0:
      print(f"step {i + 1}/{n} failed (exit status {rc}).", file=out)
      rest = plan.steps[i + 1:]
      if rest:
        print("Not run:\n" + "\n".join(f"  $ {r.line}" for r in rest), file=out)
      return rc
  return 0


def _poll(s: Step, run, sleep, out: TextIO) -> int:
  while True:
    done = run(list(s.argv), capture_output=True, text=True)
    state = done.stdout.strip()
    print(f"    {state or '(no output)'}", file=out, flush=True)
    if done.returncode != 0:
      return done.returncode
    if state in s.until:
      return 0
    if state in s.fail_on:
      return 1
    sleep(s.every_s)


# ---------------------------------------------------------------------------- commands


def env_argv(env: Mapping[str, str]) -> list[str]:
  """`env K=V ... ` as an argv prefix: it sets the variables on any host, under any shell."""
  return ["env", *(f"{k}={v}" for k, v in env.items())] if env else []


def sweep_argv(python: str, config: str | None, overrides: Sequence[str],
               workdir: str | None) -> list[str]:
  """`chinchax sweep ...`, run as `python -m chinchax.cli` so that it needs nothing on PATH."""
  argv = [python, "-m", "chinchax.cli", "sweep"]
  if config:
    argv.append(f"--config={config}")
  argv += overrides
  if workdir:
    argv.append(f"--workdir={workdir}")
  return argv


RESTARTS = 3  # reruns on one host after a host problem, before the job is left failed
RESTART_PAUSE_S = 5  # for the other hosts' processes to end too before this one joins again


def remote_start(run_dir: str, argv: Sequence[str]) -> str:
  """A shell command that starts `argv` in `run_dir` detached from the ssh session.

  A background subshell that ignores SIGHUP (what `nohup` does; ignored signals stay ignored
  across exec) and reads nothing from the session, so closing the session does not stop it.
  It reruns `argv` (up to RESTARTS times) when it exits with a status of a host problem
  (chinchax/exit_codes.py's HOST: a lost, stuck or missing host), as every other host of the
  job does, so that the job joins again and resumes from its last checkpoint.
  """
  host = "|".join(str(c) for c in exit_codes.HOST)
  loop = (f"n=0; while :; do {shlex.join(argv)}; rc=$?; case $rc in {host}) ;; *) break;; "
          f"esac; [ $n -ge {RESTARTS} ] && break; n=$((n+1)); "
          f'echo "chinchax: exit status $rc (a host problem): restart $n of {RESTARTS}"; '
          f"sleep {RESTART_PAUSE_S}; done")
  return (f"cd {shlex.quote(run_dir)} || exit 1; rm -f {EXIT}; "
          f'(trap "" HUP; {loop}; echo $rc > {EXIT}) '
          f"< /dev/null > {LOG} 2>&1 & echo $! > {PID}")


def remote_follow(run_dir: str) -> str:
  """A shell command that prints the sweep log as it grows, returns when the sweep ends and
  exits with the sweep's own exit status."""
  return (f"cd {shlex.quote(run_dir)} || exit 1; "
          f'tail -n +1 -f --pid="$(cat {PID})" {LOG}; '
          f'exit "$(cat {EXIT} 2>/dev/null || echo 1)"')


# ---------------------------------------------------------------------------- flags


class Parser(argparse.ArgumentParser):
  """argparse that reports a bad flag as one UserError line instead of usage + exit."""

  def __init__(self, **kw):
    super().__init__(allow_abbrev=False, **kw)

  def error(self, message: str):
    raise UserError(f"{message} (see {self.prog} --help)")


def add_sweep_flags(p: argparse.ArgumentParser) -> None:
  p.add_argument("--config", help="sweep config, PATH[:ARG]; --config.KEY=VALUE overrides it")
  p.add_argument("--workdir", help="sweep workdir (gs://bucket/path on several hosts)")
  p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                 help="an environment variable for the sweep (repeatable), e.g. TFDS_DATA_DIR")
  p.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")


def parse(p: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.Namespace,
                                                                    list[str]]:
  """The launcher's flags, and the `--config.KEY=VALUE` overrides passed to the sweep as-is."""
  args, rest = p.parse_known_args(list(argv))
  for a in rest:
    if not a.startswith("--config."):
      raise UserError(f"unrecognized argument {a!r} (see {p.prog} --help)")
    if "=" not in a:
      raise UserError(f"override {a!r} needs a value: write it as --config.KEY=VALUE")
  if rest and not args.config:
    raise UserError(f"{rest[0]!r} overrides a config, but no --config=PATH was given")
  return args, rest


def parse_env(pairs: Sequence[str]) -> dict[str, str]:
  env = {}
  for pair in pairs:
    key, eq, value = pair.partition("=")
    if not eq or not _ENV_KEY.fullmatch(key):
      raise UserError(f"--env={pair!r} is not KEY=VALUE with KEY a variable name")
    env[key] = value
  return env


# ---------------------------------------------------------------------------- the sweep, here


def validate_sweep(config: str | None, overrides: Sequence[str]):
  """The checks of `chinchax sweep --dry-run`, here, before anything is created: the config
  loads, every override names a key of it, the grid resolves. Returns the resolved sweep
  config, or raises a UserError of one line."""
  from chinchax.sweeps import spec as spec_lib  # pylint: disable=g-import-not-at-top  (jax)
  from chinchax.cli import flags  # pylint: disable=g-import-not-at-top
  from chinchax.cli import sweep as sweep_cli  # pylint: disable=g-import-not-at-top
  argv = ([f"--config={config}"] if config else []) + list(overrides)
  f = flags.parse_config_flags(argv, "chinchax sweep", sweep_cli.DEFAULT_CONFIG)
  return spec_lib.resolve(f.config, ".").config


def tokenizer_file(config) -> str | None:
  """The SentencePiece model a sweep reads from this machine's disk (None: bytes, or gs://,
  which every host reads itself): it has to travel to every host."""
  data = config.train.data
  path = str(data.get("spm_model", "") or "")
  if data.get("tokenizer") != "spm" or not path or "://" in path:
    return None
  if not os.path.isfile(path):
    raise UserError(f"--config.train.data.spm_model={path}: not found here, and every host "
                    "needs it: give a local file (it is copied) or a gs:// path")
  return path


def shipped(config: str | None) -> str | None:
  """The config file to copy to other hosts: a file here (not a named config, which is
  installed with chinchax everywhere)."""
  path = (config or "").partition(":")[0]
  return path if path and os.path.isfile(path) else None


def cli(prog: str, build: Callable[[Sequence[str]], tuple[Plan, bool]],
        argv: Sequence[str]) -> int:
  """Runs a launcher: `build` turns flags into (plan, dry_run); a UserError is one line, exit 2."""
  try:
    plan, dry_run = build(argv)
  except UserError as e:
    print(f"{prog}: error: {e}", file=sys.stderr)
    return 2
  return execute(plan, dry_run=dry_run)
