"""`chinchax sweep` on a gs:// workdir whose bucket fails now and then (tests/helpers/fake_gcs.py
injects HTTP errors): transient faults are retried and the sweep ends as without them; a
persistent one ends in one line naming the path, leaves no record half-written, and a rerun
finishes the sweep without training a finished cell again. train() is the known-law stand-in
of test_sweep.py and the fit a stand-in that writes law.json (the real fit and its plots take
most of a minute on two cores and are tested on gs:// by test_sweep_gcs.py); the runner, its
records and the report are the real ones."""

import json

from chinchax import atomic
from chinchax import cli
from chinchax.errors import UserError
from chinchax.sweeps import lock, report
from chinchax.sweeps.train import loop

from tests.helpers import sweep_helper

URL = "gs://bucket/sweep"


def _setup(monkeypatch, fake_gcs):  # noqa: F811
  trained = []

  def counting_train(c, workdir, **kw):
    trained.append(c.name)
    return sweep_helper.synthetic_train(c, workdir, **kw)

  def fit(workdir, bootstrap):
    del bootstrap
    points = sum(json.loads(l)["status"] == "done"
                 for l in atomic.read_text(f"{workdir}/runs.jsonl").splitlines())
    atomic.write_json(f"{workdir}/law.json", {"data": {"points": points}})
    raise UserError("stand-in fit: no law")

  monkeypatch.setattr(loop, "train", counting_train)
  monkeypatch.setattr(report, "fit_workdir", fit)
  monkeypatch.setattr(atomic, "_sleep", lambda s: None)  # the backoff, without the wait
  monkeypatch.setattr(lock, "SETTLE_S", 0.0)
  return trained, ["sweep", *sweep_helper.synthetic_argv(URL), "--config.bootstrap=0", "--quiet"]


def _runs(fake_gcs):
  return [json.loads(l) for l in fake_gcs.local(f"{URL}/runs.jsonl").read_text().splitlines()]


def test_transient_faults_are_retried_and_the_sweep_ends_as_without_them(
    fake_gcs, monkeypatch, capsys):  # noqa: F811
  trained, argv = _setup(monkeypatch, fake_gcs)
  for op, pattern, times in [("write", "result.json", 3), ("write", "runs.jsonl", 4),
                             ("read", "runs.jsonl", 2), ("read", "result.json", 2),
                             ("write", "law.json", 1), ("write", "metrics.jsonl", 2),
                             ("list", "bucket/sweep", 3)]:
    fake_gcs.faults.add(op, pattern, times=times)
  assert cli.run(argv) == 1, capsys.readouterr().err  # 1: the stand-in fit gives no law
  assert len(fake_gcs.faults.raised) == 3 + 4 + 2 + 2 + 1 + 3  # no metrics.jsonl: stand-in
  lines = _runs(fake_gcs)
  assert len({l["name"] for l in lines}) == len(lines) == len(trained)
  for l in lines:
    assert json.loads(fake_gcs.local(f"{URL}/{l['name']}/result.json").read_text()) == l
  assert json.loads(fake_gcs.local(f"{URL}/law.json").read_text())["data"]["points"] == sum(
      l["status"] == "done" for l in lines)


def test_a_persistent_fault_is_one_line_and_a_rerun_finishes_without_retraining(
    fake_gcs, monkeypatch, capsys):  # noqa: F811
  trained, argv = _setup(monkeypatch, fake_gcs)
  fake_gcs.faults.add("write", "runs.jsonl")  # the bucket refuses that object for good
  assert cli.run(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith(
      f"chinchax sweep: error: {URL}/runs.jsonl: could not write after 5 tries"), err
  assert not fake_gcs.local(f"{URL}/runs.jsonl").exists()  # nothing half-written
  # The cell that finished before the fault kept its record (the index is rebuilt from it).
  (first,) = trained
  assert json.loads(fake_gcs.local(f"{URL}/{first}/result.json").read_text())["status"] == "done"

  fake_gcs.faults.clear()
  assert cli.run(argv) == 1
  assert first not in trained[1:]  # not trained again
  names = [l["name"] for l in _runs(fake_gcs)]
  assert sorted(names) == sorted(set(trained)) and len(names) == len(set(names))
