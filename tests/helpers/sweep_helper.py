"""Shared by the sweep tests: a two-cell grid cheap enough to train on CPU in a test.

Run as a script it trains that grid with the executor given (in a fresh process, so that
XLA_FLAGS can ask for fake CPU devices) and prints one JSON line per cell:

    python tests/helpers/sweep_helper.py WORKDIR EXECUTOR [DEVICES_PER_CELL [--config.K=V ...]]
"""

import json
import os
import sys
import time

# Two IsoFLOP sizes at one small budget: ~8-13 steps each.
OVERRIDES = ["--config.budgets=(2e9,)", "--config.sizes=(45376,69952)",
             "--config.min_steps=5", "--config.train.eval_tokens=1024",
             "--config.train.log_every=10", "--config.train.checkpoint.every_steps=4",
             "--config.bootstrap=0"]
CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "sweeps", "configs", "tiny.py")


def argv(workdir: str, *more: str) -> list[str]:
  return [f"--config={CONFIG}", f"--workdir={workdir}", *OVERRIDES, *more]


def results(workdir: str) -> dict[str, dict]:
  """{cell: result.json} of every cell folder in the workdir."""
  out = {}
  for name in sorted(os.listdir(workdir)) if os.path.isdir(workdir) else ():
    path = os.path.join(workdir, name, "result.json")
    if os.path.exists(path):
      with open(path) as f:
        out[name] = json.load(f)
  return out


# --------------------------------------------------------------------------- a known law

TRUTH = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
FAILING_CELL = "C3e12-N1.57e5"  # the middle size of the middle budget (shape recipe)


OPENED = []  # the `opened` each synthetic run was handed (the sweep's preflight)


def synthetic_train(c, workdir, *, stop=None, quiet=False, devices=None, checkpoint_lock=None,
                    progress=None, opened=None):
  """The run (`run.loop.train`) replaced by the known law L(N, D): the runner, fit and report
  see real records."""
  from chinchax.scaling.runs import conventions  # pylint: disable=g-import-not-at-top
  from chinchax.scaling.runs import records  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps.train import config as run_config  # pylint: disable=g-import-not-at-top
  del stop, quiet, devices, checkpoint_lock, progress
  OPENED.append(opened)
  if c.name == FAILING_CELL:
    raise RuntimeError("out of memory\nsecond line of the message")
  shape = run_config.model_config(c, 258).shape
  N, D = conventions.params(shape), c.tokens
  loss = TRUTH["E"] + TRUTH["A"] / N**TRUTH["alpha"] + TRUTH["B"] / D**TRUTH["beta"]
  record = records.make(name=c.name, shape=shape, D=D, budget=c.budget or None,
                           eval_loss=loss, train_loss=loss, steps=1, wall_s=0.0)
  records.write_result(workdir, record)  # local or gs://, as train() writes it
  return record


def synthetic_argv(workdir):
  return [f"--config={CONFIG}", f"--workdir={workdir}",
          "--config.budgets=(1e12,3e12,1e13)", "--config.n_per_budget=5",
          "--config.span=0.5", "--config.allow_repeats=True", "--config.bootstrap=30"]


def main(workdir: str, executor: str, devices_per_cell: str = "1", *more: str) -> None:
  from chinchax import cli  # pylint: disable=g-import-not-at-top
  t0 = time.time()
  rc = cli.run(["sweep", *argv(workdir, f"--config.executor={executor}",
                               f"--config.devices_per_cell={devices_per_cell}", "--quiet",
                               *more)])
  import jax  # pylint: disable=g-import-not-at-top  (started by the sweep)
  print(json.dumps({"rc": rc, "wall_s": time.time() - t0, "host_devices": len(jax.devices()),
                    "results": {k: {"status": v["status"], "eval_loss": v["eval_loss"],
                                    "devices": v.get("devices")}
                                for k, v in results(workdir).items()}}))


if __name__ == "__main__":
  main(*sys.argv[1:])
