"""A tiny run with early stopping (stops on schedule, keeps its best checkpoint), then
`chinchax eval` probes its checkpoints on the run's validation set and an extra corpus."""

import json
import os
import sysconfig

import pytest

from chinchax.scaling.runs import records
from chinchax.errors import UserError
from chinchax.cli import eval as cli_eval
from chinchax.sweeps.train import metrics
from chinchax.sweeps.train import hooks, loop


@pytest.mark.slow
def test_early_stopped_run_then_eval_probe(tmp_path, tiny_config):
  c = tiny_config
  c.eval_every, c.log_every, c.checkpoint.every_steps = 4, 4, 4
  # A 50% improvement per eval is impossible: the run stops after 1 + patience evals.
  c.early_stop.patience, c.early_stop.min_rel_improvement = 2, 0.5
  workdir = str(tmp_path / "run")
  rec = loop.train(c, workdir, quiet=True)
  tps = c.batch_size * c.seq_len
  assert rec["status"] == "done" and rec["early_stopped"] == 12 and rec["steps"] == 12
  assert rec["D"] == 12 * tps
  evals = {r["step"]: r["eval_loss"] for r in records.read_metrics(os.path.join(workdir, "metrics.jsonl"))
           if r.get("eval_loss") is not None}
  best_step = min((s for s in evals if s <= 12), key=evals.get)
  assert sorted(os.listdir(os.path.join(workdir, hooks.BEST_DIR))) == [str(best_step)]

  extra = os.path.join(sysconfig.get_paths()["stdlib"], "json")
  assert cli_eval.main(["--workdir", workdir, "--steps=all", f"--data.corpus={extra}",
                        "--eval_tokens=512", "--quiet"]) == 0
  assert cli_eval.main(["--workdir", workdir, "--steps=best", "--quiet"]) == 0
  with open(os.path.join(workdir, "eval_probe.jsonl")) as f:
    rows = [json.loads(l) for l in f]
  saved = sorted(int(s) for s in os.listdir(os.path.join(workdir, "checkpoints")) if s.isdigit())
  assert {(r["step"], r["set"]) for r in rows if r["eval_tokens"] == 512} == {
      (s, name) for s in saved for name in ("validation", extra)}
  # The best checkpoint on the run's own eval set reproduces the loss the run logged.
  (best,) = [r for r in rows if r["checkpoint"] == hooks.BEST_DIR]
  assert best["step"] == best_step
  assert best["eval_loss"] == pytest.approx(evals[best_step], rel=1e-5)

  with pytest.raises(UserError, match="no checkpoint at"):
    cli_eval.main(["--workdir", workdir, "--steps=999"])
  with pytest.raises(UserError, match="config.json"):
    cli_eval.main(["--workdir", str(tmp_path)])
