"""The stop flag: set by SIGTERM (a preemption) or SIGINT (Ctrl-C), read by the train loop,
which saves a checkpoint and returns where it stands. On several processes the step they all
stop at is agreed by sweeps/hosts/watch.py; a closed stdout sets it too (`request_stop`)."""

import signal
import threading


class StopFlag:
  """Set by SIGTERM (preemption) or SIGINT; the train loop saves and exits when it is set."""

  def __init__(self):
    self.event = threading.Event()
    self.reason = None
    self._previous = {}

  def install(self) -> "StopFlag":
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGTERM, signal.SIGINT):
        self._previous[sig] = signal.signal(sig, self._handle)
    _INSTALLED.append(self)
    return self

  def uninstall(self) -> None:
    """Puts back the handlers `install` replaced (a finished run must not swallow Ctrl-C)."""
    for sig, handler in self._previous.items():
      signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    self._previous = {}
    if self in _INSTALLED:
      _INSTALLED.remove(self)

  def set(self, reason: str) -> None:
    if not self.event.is_set():
      self.reason = reason
    self.event.set()

  def _handle(self, signum, _frame):
    self.reason = signal.Signals(signum).name
    self.event.set()

  def __bool__(self) -> bool:
    return self.event.is_set()


_INSTALLED: list[StopFlag] = []


def request_stop(reason: str) -> bool:
  """Sets every installed StopFlag as a signal would (e.g. "SIGPIPE": stdout's reader left);
  False when none is installed."""
  for flag in list(_INSTALLED):
    flag.set(reason)
  return bool(_INSTALLED)
