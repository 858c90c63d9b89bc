"""The exit status of a `chinchax sweep` or `chinchax train` that a stop ended: 128 + the
signal's number, as a shell reports a killed process, with the resume hint on stderr."""

import sys

from chinchax import exit_codes

STOP_STATUS = {"SIGINT": exit_codes.SIGINT, "SIGPIPE": exit_codes.SIGPIPE,
               "SIGTERM": exit_codes.SIGTERM}


def stopped(prog: str, reason: str | None) -> int:
  """The resume hint on stderr; the exit status of a run stopped by `reason`."""
  why = {"SIGINT": "Ctrl-C", "SIGPIPE": "stdout's reader left (broken pipe)"}.get(
      reason or "", reason or "a signal")
  print(f"{prog}: stopped by {why}; finished work is recorded and the running one "
        "checkpointed: rerun the same command to resume", file=sys.stderr, flush=True)
  return STOP_STATUS.get(reason or "", exit_codes.SIGTERM)
