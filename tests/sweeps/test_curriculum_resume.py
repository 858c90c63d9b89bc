"""A run stopped inside a curriculum and resumed matches one never stopped, step for step."""

import json
import os
import sysconfig

import pytest

from chinchax.scaling.runs import records
from chinchax.sweeps.train import metrics
from chinchax.sweeps.configs import train as train_config
from chinchax.sweeps.train import loop

STDLIB = sysconfig.get_paths()["stdlib"]


class StopAt:
  """A stop flag that turns true at the n-th check (train() checks once per step)."""

  def __init__(self, n: int):
    self.n, self.calls, self.reason = n, 0, "test"

  def __bool__(self) -> bool:
    self.calls += 1
    return self.calls >= self.n


def config(data_dir: str):
  c = train_config.get_config("tiny")
  c.data.data_dir = data_dir
  c.data.mixture.sources = (os.path.join(STDLIB, "*.py"), os.path.join(STDLIB, "encodings", "*.py"))
  c.data.mixture.weights = ((0.9, 0.1), (0.1, 0.9))  # soft mixing from clean to broad
  c.data.mixture.kind = "linear"
  c.log_every = 1
  return c


@pytest.mark.slow
def test_resume_inside_a_curriculum_is_exact(tmp_path):
  data_dir = str(tmp_path / "data")
  whole = loop.train(config(data_dir), str(tmp_path / "whole"), quiet=True)
  assert whole["status"] == "done"

  cut = str(tmp_path / "cut")
  stopped = loop.train(config(data_dir), cut, quiet=True, stop=StopAt(9))
  assert stopped == {"status": "stopped", "step": 9, "reason": "test"}
  resumed = loop.train(config(data_dir), cut, quiet=True)
  assert resumed["status"] == "done"

  a = records.read_metrics(os.path.join(tmp_path, "whole", "metrics.jsonl"))
  b = records.read_metrics(os.path.join(cut, "metrics.jsonl"))
  pick = lambda rows, k: [(r["step"], r[k]) for r in rows if k in r]
  assert pick(a, "train_loss") == pick(b, "train_loss")  # every step, bit for bit
  assert pick(a, "tokens_by_source") == pick(b, "tokens_by_source")
  assert pick(a, "mixture_weights") == pick(b, "mixture_weights")
  assert resumed["eval_loss"] == whole["eval_loss"]
  # The curriculum really moved: the broad source's share grew over the run.
  w = [r["mixture_weights"][1] for r in a if "mixture_weights" in r]
  assert w[0] < 0.2 < 0.8 < w[-1]
  assert json.dumps(resumed["mixture"]["tokens_by_source"]) == json.dumps(
      whole["mixture"]["tokens_by_source"])
