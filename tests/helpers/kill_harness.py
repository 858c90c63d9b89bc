"""Kill -9 anywhere: `chinchax train` and `chinchax sweep` killed, rerun, and compared bit for bit.

A trial starts a fresh workdir, runs the command once per kill in its list (each run killed,
the next one resuming what the last left), then once more to the end, and compares the
result with an uninterrupted run of the same command:

* every logged train and eval loss (metrics.jsonl) and the record's final losses equal the
  uninterrupted run's to the bit, with no row missing or repeated;
* a sweep: each cell's record equals the reference's, runs.jsonl holds each cell once, equal
  to its result.json, and a cell that was done before a rerun is not trained again (its
  result.json and metrics.jsonl untouched, and the rerun says it skipped it).

A kill is one of

    Kill("point", "NAME[:K]")  the process SIGKILLs itself the K-th time it reaches the named
                               point (chinchax/killpoints.py): coverage chosen, not hoped for
    Kill("point", "NAME[:K]", "TERM")  the same with SIGTERM (a preemption notice): the run must
                               save a checkpoint where it stopped and exit 143
    Kill("time", at_s=T)       SIGKILL from outside T seconds after the start; when it is a
                               trial's first kill and the run ends first, the trial starts
                               afresh with T/2 (up to 4 times), so that it is a kill
    Kill("term", at_s=T)       SIGTERM T seconds after the start (before the train loop has
                               installed its handler, SIGTERM simply ends the process)

A point kill that does not kill (the point was never reached) fails the trial.
"""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from chinchax import killpoints

from tests.helpers import sweep_helper
from tests.helpers import train_util as tu

ROOT = tu.ROOT
TRAIN_STEPS, EVERY = 24, 8
TRAIN_OVERRIDES = ("--config.log_every=1", f"--config.checkpoint.every_steps={EVERY}",
                   f"--config.eval_every={EVERY}", "--config.checkpoint.every_minutes=0")
LOSSES = ("train_loss", "eval_loss")


@dataclasses.dataclass(frozen=True)
class Kill:
  how: str            # point | time | term
  point: str = ""     # NAME[:K] for how=point
  signal: str = "KILL"  # for how=point: KILL or TERM
  at_s: float = 0.0   # seconds after the start for how=time|term

  def __str__(self) -> str:
    if self.how == "point":
      return self.point if self.signal == "KILL" else f"{self.point} SIGTERM"
    return f"{self.how}@{self.at_s:.1f}s"


@dataclasses.dataclass
class Outcome:
  rc: int
  out: str
  err: str
  wall_s: float


def command(kind: str, workdir: str, data_dir: str) -> list[str]:
  if kind == "train":
    args = tu.tiny_args(workdir, data_dir, *TRAIN_OVERRIDES)
  else:
    # --verbose: the cells' own lines (resumes, the SIGTERM save) are what the trials read.
    args = [*sweep_helper.argv(workdir), "--verbose"]
  return [sys.executable, "-m", "chinchax.cli", kind, *args]


def launch(cmd: list[str], env: dict, kill: Kill | None = None, timeout: float = 600) -> Outcome:
  env = dict(env)
  env.pop(killpoints.ENV, None)
  if kill is not None and kill.how == "point":
    env[killpoints.ENV], env[killpoints.SIGNAL_ENV] = kill.point, kill.signal
  t0 = time.time()
  proc = subprocess.Popen(cmd, env=env, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
  if kill is not None and kill.how in ("time", "term"):
    try:
      proc.wait(timeout=kill.at_s)
    except subprocess.TimeoutExpired:
      proc.send_signal(signal.SIGKILL if kill.how == "time" else signal.SIGTERM)
  out, err = proc.communicate(timeout=timeout)
  return Outcome(proc.returncode, out, err, time.time() - t0)


# --------------------------------------------------------------------------- what a run left


def rows(run_dir: str) -> list[dict]:
  path = os.path.join(run_dir, "metrics.jsonl")
  if not os.path.exists(path):
    return []
  with open(path, encoding="utf-8", errors="replace") as f:
    out = []
    for line in f:
      try:
        out.append(json.loads(line))
      except json.JSONDecodeError:
        out.append({"torn": line})
    return out


def losses(run_dir: str) -> list[tuple]:
  """(step, name, value) of every logged loss, in file order."""
  return [(r["step"], k, r[k]) for r in rows(run_dir) for k in LOSSES if k in r]


def cell_dirs(workdir: str) -> list[str]:
  """A sweep's cell folders: those train() wrote its config into."""
  return sorted(os.path.join(workdir, d) for d in os.listdir(workdir)
                if os.path.exists(os.path.join(workdir, d, "config.json")))


def done_cells(workdir: str) -> dict[str, tuple[bytes, bytes]]:
  """{cell: (result.json, metrics.jsonl) bytes} of the cells whose record says done."""
  out = {}
  for d in cell_dirs(workdir) if os.path.isdir(workdir) else ():
    record = tu.result(d) if _parses(os.path.join(d, "result.json")) else None
    if record is not None and record.get("status") == "done":
      with open(os.path.join(d, "result.json"), "rb") as f, \
           open(os.path.join(d, "metrics.jsonl"), "rb") as g:
        out[os.path.basename(d)] = (f.read(), g.read())
  return out


def _parses(path: str) -> bool:
  try:
    with open(path) as f:
      json.load(f)
    return True
  except (OSError, ValueError):
    return False


def reference(kind: str, workdir: str, data_dir: str, env: dict) -> dict:
  """The uninterrupted run: what every trial must end with."""
  o = launch(command(kind, workdir, data_dir), env)
  assert o.rc == (0 if kind == "train" else 1), o.err[-3000:]  # sweep: 2 cells, too few to fit
  return {"rc": o.rc, "wall_s": o.wall_s,
          "runs": {name: {"losses": losses(r), "result": tu.result(r)}
                   for name, r in runs_of(kind, workdir).items()}}


def runs_of(kind: str, workdir: str) -> dict[str, str]:
  """{name: folder} of the runs a command leaves: the one run, or a sweep's cells."""
  if kind == "train":
    return {"run": workdir}
  return {os.path.basename(d): d for d in cell_dirs(workdir)}


# --------------------------------------------------------------------------- one trial


def _check_term(o: Outcome, workdir: str, kind: str, in_loop: bool) -> tuple[str, list[str]]:
  """(what the SIGTERM did, problems): inside the train loop it must end in exit 143 and a
  committed checkpoint at the step it stopped at; before the loop the process just ends."""
  m = re.search(r"stopped by SIGTERM at step (\d+); checkpoint saved", o.out)
  outside = o.rc == 143 and "stopped by SIGTERM outside a run" in o.err  # chinchax/cli
  if o.rc != 143 or outside:
    if in_loop or o.rc not in (0, 1, 143, -signal.SIGTERM):
      return "", [f"SIGTERM gave exit {o.rc}: {o.err[-500:]}"]
    return (f"exit {o.rc} (before the train loop)" if o.rc < 0 or outside else "ended first"), []
  if m is None:
    return "", [f"exit 143 without the 'checkpoint saved' line: {o.out[-500:]}"]
  step = m.group(1)
  if not any(os.path.exists(os.path.join(r, "checkpoints", step, "_CHECKPOINT_METADATA"))
             for r in runs_of(kind, workdir).values()):
    return "", [f"stopped at step {step} but no committed checkpoint {step}"]
  return f"stopped at step {step}, checkpoint {step} saved", []


def trial(kind: str, kills: list[Kill], workdir: str, data_dir: str, env: dict,
          ref: dict) -> dict:
  """Runs the kills then the rerun to the end; returns the trial's figures and problems."""
  cmd = command(kind, workdir, data_dir)
  problems, retrained, killed_at = [], 0, []
  for kill in kills + [None]:
    before = done_cells(workdir) if kind == "sweep" else {}
    o = launch(cmd, env, kill)
    for _ in range(4):  # a first kill by time that came after the end: afresh, sooner
      if kill is None or kill.how != "time" or o.rc == -signal.SIGKILL or killed_at:
        break
      shutil.rmtree(workdir)
      kill = dataclasses.replace(kill, at_s=kill.at_s / 2)
      o = launch(cmd, env, kill)
    if kill is None:
      if o.rc != ref["rc"]:
        problems.append(f"final run exit {o.rc}, reference {ref['rc']}: {o.err[-1500:]}")
    elif kill.how == "point" and kill.signal == "KILL":
      if o.rc != -signal.SIGKILL:
        problems.append(f"{kill}: the point was not reached (exit {o.rc})")
      killed_at.append(str(kill))
    elif kill.how == "time":
      killed_at.append(str(kill) if o.rc == -signal.SIGKILL else f"{kill} (ended first)")
    else:
      what, found = _check_term(o, workdir, kind, in_loop=kill.how == "point")
      problems += found
      killed_at.append(f"{kill}: {what}")
    for cell, files in before.items():  # done before this run: never trained again
      after = done_cells(workdir).get(cell)
      if after != files:
        retrained += 1
        problems.append(f"{cell} was done before the run after {kill} and was changed by it")
      elif kill is None and f"{cell}: skipped, already done" not in o.out:
        problems.append(f"{cell} was done but the rerun did not say it skipped it")
  problems += compare(kind, workdir, ref)
  return {"kind": kind, "kills": killed_at, "retrained": retrained, "problems": problems}


def compare(kind: str, workdir: str, ref: dict) -> list[str]:
  problems = []
  got = runs_of(kind, workdir)
  if set(got) != set(ref["runs"]):
    return [f"runs {sorted(got)} != reference {sorted(ref['runs'])}"]
  for name, r in got.items():
    want, record = ref["runs"][name], tu.result(r)
    if losses(r) != want["losses"]:
      problems.append(f"{name}: metrics.jsonl losses differ from the reference")
    if any("torn" in row for row in rows(r)):
      problems.append(f"{name}: a torn line left in metrics.jsonl")
    for k in ("status", "steps", "train_loss", "eval_loss", "eval_bpb"):
      if record.get(k) != want["result"].get(k):
        problems.append(f"{name}: {k} {record.get(k)!r} != reference {want['result'].get(k)!r}")
  if kind == "sweep":
    with open(os.path.join(workdir, "runs.jsonl")) as f:
      lines = [json.loads(l) for l in f]
    names = [l["name"] for l in lines]
    if sorted(names) != sorted(got):
      problems.append(f"runs.jsonl holds {names}, not each of {sorted(got)} once")
    for line in lines:
      if line.get("name") in got and line != tu.result(got[line["name"]]):
        problems.append(f"runs.jsonl's line of {line['name']} differs from its result.json")
  return problems


if __name__ == "__main__":
  # python tests/helpers/kill_harness.py train|sweep ROOT "POINT[:K]" ...: one trial, printed.
  kind_, root_, *points = sys.argv[1:]
  env_ = tu.child_env(os.path.join(root_, "xla_cache"))
  env_["PYTHONPATH"] = ROOT
  data_ = os.path.join(root_, "tfds")
  ref_ = reference(kind_, os.path.join(root_, "reference"), data_, env_)
  print(json.dumps(trial(kind_, [Kill("point", p) for p in points],
                         os.path.join(root_, "trial"), data_, env_, ref_), indent=2))
