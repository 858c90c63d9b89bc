"""scaling/numerics/forks.py: chunks computed in forked children come back in order, a child
that dies or raises has its chunk computed (and its error raised) in the parent, no child
outlives the call, and nothing forks outside `allowed()`, beside another Python thread or
where jax is imported.
`chinchax fit`, which forks, writes the law a library call (threads, or one chunk after
another) writes, for each approach."""

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from chinchax.scaling import api
from chinchax.scaling.numerics import forks

# Run in a fresh process: this one has imported jax, where the module refuses to fork.
CHILD = textwrap.dedent("""
  import json, os, signal, sys, time
  from chinchax.scaling.numerics import forks

  def gone():  # no child of this process is left, running or unreaped
    try:
      os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
      return True
    return False

  me = os.getpid()
  out = {}
  with forks.allowed():
    got = forks.map_chunks(lambda c: (os.getpid(), [2 * x for x in c], forks.usable()),
                           [[1, 2], [3], [4, 5]])
    out["values"] = [v for _, v, _ in got]
    out["pids"] = [p for p, _, _ in got]
    out["may_fork"] = [u for _, _, u in got]  # a child forks no children of its own
    got = forks.map_shares(lambda share: (os.getpid(), list(share)), list(range(7)))
    out["shares"] = [share for _, share in got]
    out["share_pids"] = len({p for p, _ in got})
    # Pinned to one core (as by `taskset -c 0`), one share, computed here.
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[0]})
    got = forks.map_shares(lambda share: (os.getpid(), list(share)), list(range(7)))
    out["pinned"] = [[p == me, share] for p, share in got]
    os.sched_setaffinity(0, set(cpus))
    out["me"] = me
    out["gone"] = gone()

    def dies(c):  # the second chunk's child kills itself; computed here it is c + 1
      if os.getpid() != me and c == 1:
        os.kill(os.getpid(), signal.SIGKILL)
      return (os.getpid(), c + 1)
    got = forks.map_chunks(dies, [0, 1, 2])
    out["died"] = [[p == me, v] for p, v in got]

    # The parent's SIGTERM handler says a line; a child signalled ends silently instead, and
    # its chunk is computed here.
    signal.signal(signal.SIGTERM, lambda *_: print(f"handler in {os.getpid()}", file=sys.stderr))
    def terminated(c):
      if os.getpid() != me:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
      return (os.getpid() == me, c)
    out["terminated"] = forks.map_chunks(terminated, [0, 1])

    def raises(c):
      if c == 1:
        raise ValueError(f"chunk {c} is bad in {'the parent' if os.getpid() == me else 'a child'}")
      return c
    try:
      forks.map_chunks(raises, [0, 1, 2])
    except ValueError as e:
      out["raised"] = str(e)
    out["gone_after_raise"] = gone()

    def interrupted(c):  # the parent's own chunk fails while the children still work
      if os.getpid() == me:
        raise KeyboardInterrupt
      time.sleep(30)
      return c
    t = time.monotonic()
    try:
      forks.map_chunks(interrupted, [0, 1, 2])
    except KeyboardInterrupt:
      out["interrupted_s"] = time.monotonic() - t
    out["gone_after_interrupt"] = gone()

    # ahead: the value made in a child while this process goes on; one that dies is made here;
    # what fn raises is raised here; a child still working when the block ends is killed.
    with forks.ahead(lambda: (os.getpid(), 6 * 7)) as get:
      pid, value = get()
      out["ahead"] = [pid != me, value]
    def dies_ahead():
      if os.getpid() != me:
        os.kill(os.getpid(), signal.SIGKILL)
      return os.getpid() == me
    with forks.ahead(dies_ahead) as get:
      out["ahead_died"] = get()
    def raises_ahead():
      raise ValueError("bad in the parent" if os.getpid() == me else "bad in a child")
    try:
      with forks.ahead(raises_ahead) as get:
        get()
    except ValueError as e:
      out["ahead_raised"] = str(e)
    t = time.monotonic()
    with forks.ahead(lambda: time.sleep(30)) as get:
      pass
    out["ahead_left_s"] = time.monotonic() - t
    out["gone_after_ahead"] = gone()
  with forks.ahead(lambda: os.getpid()) as get:  # outside allowed(): made here, by get()
    out["ahead_outside"] = get() == me
  print(json.dumps(out))
""")


@pytest.mark.slow  # forks processes, in a process of its own
def test_children_compute_chunks_in_order_and_failures_come_home():
  r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr[-3000:]
  out = json.loads(r.stdout)
  assert out["values"] == [[2, 4], [6], [8, 10]]
  me, pids = out["me"], out["pids"]
  assert pids[0] == me and len({me, *pids[1:]}) == 3, pids  # two children, one each
  assert out["may_fork"] == [True, False, False]
  # One contiguous share per core this process may run on, each in its own process.
  n = min(len(os.sched_getaffinity(0)), 7)
  assert [x for share in out["shares"] for x in share] == list(range(7))
  assert len(out["shares"]) == n and out["share_pids"] == n
  assert max(map(len, out["shares"])) - min(map(len, out["shares"])) <= 1
  assert out["pinned"] == [[True, [0, 1, 2, 3, 4, 5, 6]]]
  assert out["gone"]
  # The dead child's chunk was computed by the parent; the living child's was not.
  assert out["died"] == [[True, 1], [True, 2], [False, 3]]
  assert out["terminated"] == [[True, 0], [True, 1]]
  assert "handler" not in r.stderr, r.stderr
  assert out["raised"] == "chunk 1 is bad in the parent"
  assert out["gone_after_raise"]
  assert out["interrupted_s"] < 10  # the sleeping children were killed, not waited for
  assert out["gone_after_interrupt"]
  assert out["ahead"] == [True, 42]
  assert out["ahead_died"] is True  # made here after the child died
  assert out["ahead_raised"] == "bad in the parent"
  assert out["ahead_left_s"] < 10 and out["gone_after_ahead"]  # killed, not waited for
  assert out["ahead_outside"] is True


def test_nothing_forks_outside_allowed_or_beside_a_thread(monkeypatch):
  def no_fork():
    raise AssertionError("forked")
  monkeypatch.setattr(os, "fork", no_fork)
  monkeypatch.setattr(threading, "active_count", lambda: 1)
  monkeypatch.delitem(sys.modules, "jax", raising=False)
  assert forks.map_chunks(lambda c: c, [1, 2]) is None  # not allowed
  assert forks.map_shares(lambda share: list(share), [1, 2, 3]) == [[1, 2, 3]]  # one call, here
  with forks.allowed():
    with forks.allowed():
      pass
    assert forks.usable() == sys.platform.startswith("linux")  # still allowed after the inner
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert forks.map_chunks(lambda c: c, [1, 2]) is None  # another thread runs
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setitem(sys.modules, "jax", sys)
    assert forks.map_chunks(lambda c: c, [1, 2]) is None  # jax is imported
    monkeypatch.delitem(sys.modules, "jax")
  assert not forks.usable()  # the outer block restored "not allowed"


def _write_csv(path, N, D, loss):
  path.write_text("N,D,loss\n" + "".join(f"{float(n)!r},{float(d)!r},{float(l)!r}\n"
                                         for n, d, l in zip(N, D, loss)))


def _same_law_from_command_and_library(tmp_path, csv, approaches, bootstrap):
  r = subprocess.run([sys.executable, "-m", "chinchax.cli", "fit", str(csv),
                      f"--approach={approaches}", f"--bootstrap={bootstrap}",
                      f"--out={tmp_path / 'cmd.json'}", "--quiet"],
                     capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  api.fit([str(csv)], approaches=approaches, bootstrap=bootstrap,
          out=str(tmp_path / "lib.json"))
  cmd, lib = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("cmd", "lib"))
  for law in (cmd, lib):
    law.pop("provenance", None)
  assert cmd == lib


@pytest.mark.slow  # runs the command in a process
def test_the_command_that_forks_writes_the_law_a_library_call_writes(tmp_path):
  rng = np.random.default_rng(3)
  C = np.repeat(np.geomspace(1e18, 1e20, 6), 20)
  N = np.concatenate([np.geomspace(3e7, 3e9, 20) * (c / 1e19) ** 0.5
                      for c in np.geomspace(1e18, 1e20, 6)])
  D = C / (6 * N)
  loss = (1.7 + 400 / N**0.34 + 410 / D**0.28) * np.exp(0.01 * rng.standard_normal(len(N)))
  _write_csv(tmp_path / "isoflop.csv", N, D, loss)
  # Approach 3: 1,000 resamples and a pilot of 400 with three starts, 1,800 starts, a chunk
  # per core; Approach 2: two chunks of 500 resamples.
  _same_law_from_command_and_library(tmp_path, tmp_path / "isoflop.csv", "2,3", 1000)
  # Approach 1 on runs of 8 sizes at 10 token counts each: 1,000 resamples of the curves.
  N = np.repeat(np.geomspace(1e7, 1e9, 8), 10)
  D = N * np.tile(np.geomspace(2, 200, 10), 8)
  loss = (1.7 + 400 / N**0.34 + 410 / D**0.28) * np.exp(0.003 * rng.standard_normal(len(N)))
  _write_csv(tmp_path / "grid.csv", N, D, loss)
  _same_law_from_command_and_library(tmp_path, tmp_path / "grid.csv", "1", 1000)
