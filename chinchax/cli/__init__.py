"""The `chinchax` console script: one dispatcher, one module per subcommand.

Subcommands are imported lazily so that `chinchax plan` never pays for importing jax.
Every subcommand is a small module `main(argv: list[str]) -> int` that parses its flags
(cli/flags.py), calls a library function and prints. A `UserError` becomes one line on stderr
and exit status 2 (a multi-host job started wrongly: one line and its status,
chinchax/exit_codes.py); Ctrl-C is exit status 130 with the resume hint; anything else is a bug and
keeps its traceback.
"""

import importlib
import os
import signal
import sys
import threading

from chinchax import exit_codes
from chinchax.errors import UserError

# name -> (module, one-line help).
COMMANDS: dict[str, tuple[str, str]] = {
    "sweep": ("chinchax.cli.sweep", "train a sweep grid (resumable), fit it, write report.md"),
    "train": ("chinchax.cli.train", "train one model (one sweep cell) end to end"),
    "fit": ("chinchax.cli.fit", "fit scaling laws to runs and write law.json"),
    "fit-hparams": ("chinchax.cli.fit_hparams",
                    "fit optimal peak LR and batch laws to an LR x batch grid of runs"),
    "fit-tasks": ("chinchax.cli.tasks",
                  "fit task accuracy from N and D in two steps and write tasks.json"),
    "plan": ("chinchax.cli.plan", "plan N and D for a compute budget from a law"),
    "next": ("chinchax.cli.next", "choose the runs that narrow the law most per FLOP"),
    "forecast": ("chinchax.cli.forecast", "write a law's forecast for a run; score it "
                 "after"),
    "law": ("chinchax.cli.law", "write a law.json from published coefficients"),
    "models": ("chinchax.cli.models", "print the shape recipe's table of model sizes"),
    "tokenizer": ("chinchax.cli.tokenizer", "train a SentencePiece tokenizer on a corpus"),
    "data": ("chinchax.cli.data", "prepare raw text (jsonl/parquet/txt) as array_record"),
    "eval": ("chinchax.cli.eval", "evaluate a run's checkpoints on extra held-out sets"),
    "report": ("chinchax.cli.report", "rebuild a sweep workdir's report.md"),
}

USAGE = "usage: chinchax COMMAND [ARGS...]  (chinchax COMMAND --help for its flags)\n\ncommands:\n" + "\n".join(
    f"  {name:<11} {doc}" for name, (_, doc) in COMMANDS.items()) + "\n  --version print chinchax's version"


def version() -> str:
  import chinchax  # pylint: disable=g-import-not-at-top
  return f"chinchax {chinchax.__version__}"


def run(argv: list[str]) -> int:
  if not argv or argv[0] in ("-h", "--help", "help"):
    print(USAGE)
    return 0 if argv else 2
  if argv[0] in ("--version", "-V", "version"):
    print(version())
    return 0
  name, rest = argv[0], argv[1:]
  if name not in COMMANDS:
    print(f"chinchax: unknown command {name!r}; one of: {', '.join(COMMANDS)}", file=sys.stderr)
    return 2
  main = threading.current_thread() is threading.main_thread()
  # Until a run installs its stop flag (and after it puts this back), a SIGTERM (a preemption
  # during startup, a join) ends the command with one line, not silently.
  previous = signal.signal(signal.SIGTERM, lambda *_: _terminated(name)) if main else None
  try:
    rc = _run(name, rest)
  finally:
    if main:
      signal.signal(signal.SIGTERM, previous)
  if watch := _hosts("watch"):  # a multi-host job: the other processes learn how this one ended
    watch.finish(rc)
  return rc


def _hosts(name: str):
  """sweeps/hosts' module `name` where the command imported it, else None. Only a command that
  trains or joins a multi-host job imports them (sweeps/train/loop.py, sweeps/hosts/
  distributed.py), and their state (a job's watch, its native log, its rollcall) exists only
  then; `chinchax fit` and `plan` do not pay for importing them (ctypes, logging, socket: 20 ms
  of a 0.6 s fit)."""
  return sys.modules.get(f"chinchax.sweeps.hosts.{name}")


def _terminated(name: str) -> None:
  """SIGTERM outside a run's stop flag: one line, and the other processes of a multi-host
  job told. At once, as the default action would: an exception could leave a library's
  threads (a checkpoint's writers) keeping the process alive; artifacts are written
  atomically, so an end at any point is a kill's."""
  native, watch = _hosts("native"), _hosts("watch")
  print(f"chinchax {name}: stopped by SIGTERM outside a run (starting, joining the job or "
        f"ending); nothing is lost: rerun the same command{native.kept() if native else ''}",
        file=sys.stderr, flush=True)
  if watch:
    watch.finish(exit_codes.SIGTERM)
  os._exit(exit_codes.SIGTERM)


def _run(name: str, rest: list[str]) -> int:
  try:
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)
  except SystemExit as e:  # --help, or argparse's own exit
    return e.code if isinstance(e.code, int) else int(e.code is not None)
  except UserError as e:
    print(f"chinchax {name}: error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:  # Ctrl-C before a run's stop flag was installed
    print(f"\nchinchax {name}: interrupted; rerun the same command to resume", file=sys.stderr)
    return 130
  except BrokenPipeError:
    return _reader_left()
  except Exception as e:
    rollcall, watch = _hosts("rollcall"), _hosts("watch")
    # A multi-host job started wrongly, or a process missing: one line and its status.
    if rollcall and isinstance(e, rollcall.Refused):
      print(f"chinchax {name}: error: {e}", file=sys.stderr)
      return e.status
    if watch:  # another process of the job lost: named, and this one ended, from there
      watch.on_error()
    raise


def _reader_left() -> int:
  """`chinchax ... | head`: the reader left. stdout is pointed at devnull so that the exit's
  flush raises nothing, and the exit status is a shell's for SIGPIPE, 128 + 13."""
  os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
  return 141


def main() -> None:
  try:
    rc = run(sys.argv[1:])
    sys.stdout.flush()  # what --help or --version printed is written here, not at exit
  except BrokenPipeError:
    rc = _reader_left()
  sys.exit(rc)


if __name__ == "__main__":
  main()
