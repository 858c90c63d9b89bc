"""Whether a process of this machine is running: the workdir lock's stale-holder check
(sweeps/lock.py) and the figure workers' watch of their command (scaling/plots/workers.py)."""

import os


def alive(pid: int) -> bool:
  """True while process `pid` exists, someone else's included (kill(pid, 0) is refused to
  us, not answered "no such process"); a zombie still counts."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True
