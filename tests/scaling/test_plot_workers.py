"""scaling/plots/workers.py: a fit's figures drawn by worker processes are the files, to the
byte, that this process draws, in the order the fit lists them; a bad worker count is one line."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from chinchax import cli
from chinchax.scaling import figures as fit_plots
from chinchax.scaling import pipeline as fit_pipeline
from chinchax.scaling.plots import workers
from chinchax.scaling.runs.table import make_runs

E, A, B, ALPHA, BETA = 1.69, 406.4, 410.7, 0.34, 0.28


@pytest.mark.slow  # starts worker processes
def test_workers_draw_the_bytes_this_process_draws(tmp_path):
  budgets = np.repeat([1e17, 1e18, 1e19], 5)
  G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))
  a = BETA / (ALPHA + BETA)
  N = np.concatenate([G * (C / 6) ** a * np.geomspace(0.3, 3, 5) for C in (1e17, 1e18, 1e19)])
  D = budgets / (6 * N)
  loss = (E + A / N**ALPHA + B / D**BETA) * np.exp(0.005 * np.random.default_rng(0)
                                                  .standard_normal(len(N)))
  fitted = fit_pipeline.fit_runs(make_runs(N, D, loss, budget=budgets),
                                 fit_pipeline.Options(bootstrap=20, approaches=("2", "3")))
  here = fit_plots.write_plots(fitted, str(tmp_path / "here"), in_process=True)
  workers.warm(2)
  try:
    there = fit_plots.write_plots(fitted, str(tmp_path / "there"))
    assert workers._pool is not None  # pylint: disable=protected-access  # drawn by workers
  finally:
    workers.close()
  names = [f"{stem}.{fmt}" for stem in ("isoflops", "optimal", "law", "residuals")
           for fmt in ("png", "svg")]
  assert [os.path.basename(p) for p in there] == names
  assert [os.path.basename(p) for p in here] == names
  assert sorted(os.listdir(tmp_path / "there")) == sorted(names)
  for name in names:
    got = (tmp_path / "there" / name).read_bytes()
    assert got == (tmp_path / "here" / name).read_bytes(), name
  # Each SVG names its figure (matplotlib writes every text as a comment beside its paths).
  titles = {"isoflops": "IsoFLOP profiles", "optimal": "Compute-optimal allocation",
            "law": "L = ", "residuals": "Residuals of Approach 3's law"}
  for stem, title in titles.items():
    assert f"<!-- {title}" in (tmp_path / "there" / f"{stem}.svg").read_text(), stem


def test_a_bad_worker_count_is_one_line(tmp_path, monkeypatch, capsys):
  monkeypatch.setenv("CHINCHAX_PLOT_WORKERS", "two")
  csv = tmp_path / "runs.csv"
  csv.write_text("N,D,loss\n1e6,1e8,3.0\n")
  assert cli.run(["fit", str(csv), f"--plots={tmp_path / 'p'}",
                  f"--out={tmp_path / 'law.json'}"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "CHINCHAX_PLOT_WORKERS must be a whole number" in err[0]
  assert not (tmp_path / "law.json").exists() and not (tmp_path / "p").exists()


def test_a_busy_host_gets_no_workers_unless_the_load_is_the_callers_own(monkeypatch):
  """A fit on a host whose CPUs are all busy draws in its own process; a sweep whose own
  cells are the load (they are ending) starts one a CPU; CHINCHAX_PLOT_WORKERS wins."""
  monkeypatch.delenv("CHINCHAX_PLOT_WORKERS", raising=False)
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
  monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 2.0, 2.0))
  assert workers.processes() == 0
  assert workers.processes(own_load=True) == 2
  monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 2.0, 2.0))
  assert workers.processes() == 2
  monkeypatch.setenv("CHINCHAX_PLOT_WORKERS", "0")
  assert workers.processes(own_load=True) == 0



KILLED = """
import os, signal, multiprocessing.forkserver
from chinchax.scaling.plots import workers
workers.warm(2)
workers._starting.join()
pids = [p.pid for p in workers._pool._processes.values()]
pids.append(multiprocessing.forkserver._forkserver._forkserver_pid)
print(" ".join(map(str, pids)), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _running(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


@pytest.mark.slow  # starts worker processes
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_workers_of_a_killed_command_end_with_it_and_release_its_output(tmp_path):
  """kill -9 of the command (a sweep killed by a test, a preempted VM's agent): its workers
  and their forkserver end too, and its stdout reaches its end, which a caller waits for."""
  pid_file = tmp_path / "pids"
  with open(pid_file, "w") as out:  # a file, not a pipe: readable whatever happens next
    p = subprocess.Popen([sys.executable, "-c", KILLED], stdout=out, stderr=subprocess.PIPE)
    p.wait(timeout=120)
  pids = [int(x) for x in pid_file.read_text().split()]
  assert len(pids) == 3 and p.returncode == -9, (pids, p.returncode)
  try:
    # The stderr pipe ends only when every process holding it (workers, forkserver) has.
    ended = threading.Thread(target=p.stderr.read, daemon=True)
    ended.start()
    ended.join(20)
    assert not ended.is_alive(), "the killed command's stderr never ended: its workers hold it"
    deadline = time.monotonic() + 10
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
      time.sleep(0.05)
    assert not [pid for pid in pids if _running(pid)]
  finally:
    for pid in pids:  # leave nothing behind when this fails
      if _running(pid):
        os.kill(pid, signal.SIGKILL)
