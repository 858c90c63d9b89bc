"""The sweep's console: progress lines with the sweep's ETA (sweeps/console.py), libraries'
warnings collapsed and a broken pipe turned into a stop (sweeps/console.py)."""

import io
import logging
import os

import pytest


from chinchax.sweeps import console
from chinchax.sweeps.train import stop as stop_lib


class FakeClock:
  def __init__(self):
    self.t = 0.0

  def __call__(self):
    return self.t


def test_eta_rescales_the_estimates_by_the_work_done():
  clock = FakeClock()
  out = io.StringIO()
  p = console.SweepProgress(["a", "b", "c"], [10.0, 10.0, 20.0], stream=out, live=False,
                             clock=clock)
  assert p.eta_s() == pytest.approx(40.0)  # nothing done: the estimates as they are
  step = p.start("a")
  clock.t = 10.0
  step(5, 10, 2e4, 3.0)  # half of a's estimated 10 s took 10 s: the machine is 2x slower
  assert p.eta_s() == pytest.approx((5.0 + 10.0 + 20.0) * 2)
  clock.t = 20.0
  line = p.end("a", "done", "eval loss 2.5000")
  assert p.eta_s() == pytest.approx((10.0 + 20.0) * 2)
  assert line == "[1/3] a: done, eval loss 2.5000 | 20.0k tok/s | 0:20 elapsed | sweep ETA 1:00"
  p.start("b")(10, 10, 1e4, 2.0)
  clock.t = 25.0  # b took 5 s of its 10: now 25 s for 20 estimated
  p.end("b", "failed", "FloatingPointError: nan")
  assert p.eta_s() == pytest.approx(20.0 * 25 / 20)
  p.start("c")
  last = p.end("c", "done", "eval loss 2.0000")
  assert last.startswith("[3/3] c: done") and "ETA" not in last  # nothing left
  assert out.getvalue().splitlines() == [line, out.getvalue().splitlines()[1], last]
  assert "\r" not in out.getvalue()  # piped: plain lines only


def test_live_bar_is_redrawn_in_place_then_replaced_by_the_cell_line():
  out = io.StringIO()
  p = console.SweepProgress(["a", "b"], [1.0, 1.0], stream=out, live=True)
  step = p.start("a")
  step(3, 12, 4.2e4, 2.75)
  step(12, 12, 4.2e4, 2.5)
  text = out.getvalue()
  assert "\r[1/2] a" in text and "3/12 steps" in text and "loss 2.7500 | 42.0k tok/s" in text
  assert "sweep ETA" in text and "\n" not in text  # updated in place: no new line yet
  line = p.end("a", "done", "eval loss 2.4")
  assert out.getvalue().endswith("\r" + line + "\n")  # the bar cleared, the line left
  assert p.bar is None


def test_a_piped_stream_gets_no_bar():
  out = io.StringIO()  # not a terminal
  p = console.SweepProgress(["a"], [1.0], stream=out)
  assert not p.live
  p.start("a")(1, 2, 1.0, 1.0)
  assert out.getvalue() == ""


def test_repeated_library_warnings_are_collapsed(monkeypatch):
  f = console._Once()
  rec = lambda msg, level=logging.WARNING: logging.LogRecord("absl", level, "x", 1, msg, (), None)
  assert f.filter(rec("orbax: a step was skipped"))
  assert not f.filter(rec("orbax: a step was skipped"))
  assert not f.filter(rec("Variant folder /x has no dataset_info.json"))
  assert f.filter(rec("another"))
  assert f.filter(rec("orbax: a step was skipped", logging.ERROR))  # errors always pass
  assert f.hidden == 2


def test_a_broken_pipe_is_a_stop_not_an_error():
  r, w = os.pipe()
  os.close(r)  # the reader left
  stream = console._PipeSafe(io.TextIOWrapper(os.fdopen(w, "wb"), write_through=True))
  flag = stop_lib.StopFlag()
  stop_lib._INSTALLED.append(flag)  # as install() does, without touching signal handlers
  try:
    assert stream.write("step 10/100\n") == len("step 10/100\n")  # no BrokenPipeError
    stream.flush()
    assert stream.closed_by_reader and flag and flag.reason == "SIGPIPE"
    stream.write("more\n")  # to /dev/null now
  finally:
    flag.uninstall()
  assert flag not in stop_lib._INSTALLED


def test_a_signal_after_a_broken_pipe_keeps_the_first_reason():
  flag = stop_lib.StopFlag()
  flag.set("SIGINT")
  flag.set("SIGPIPE")
  assert flag.reason == "SIGINT"
