"""`chinchax sweep --workdir=gs://...` end to end: real training, then fit, plots and report.

The bucket is tests/fake_gcs.py's: fsspec's gs protocol is served from a local folder, so
every file chinchax writes or reads (result.json, metrics.jsonl, TensorBoard events,
runs.jsonl, law.json, plots, report.md) and orbax's checkpoint metadata go through the same
etils.epath → fsspec calls as on GCS, with rename refused and folders only name prefixes.
Two orbax calls are replaced because they bypass fsspec and would reach Google's servers:
`gcs_utils.get_kvstore_for_gcs` (the spec of TensorStore's own HTTP GCS driver, which writes
the array data and cannot be faked through fsspec) gives TensorStore's `file` driver on the
same local folder, and `gcs_utils.is_hierarchical_namespace_enabled` (a google-cloud-storage
API query) says the bucket is flat.

Real training is the two-cell grid of the other sweep tests: too few runs for a fit (the toy
runs' losses would not give a law anyway), so the fit, plots and report are checked on the
known-law stand-in for train() of test_sweep.py, through the same runner and the same bucket.
"""

import json
import os

import pytest

from chinchax.scaling.runs import records
from chinchax.scaling.law import artifact as law_lib
from chinchax.sweeps.train import checkpoint, metrics
from chinchax import cli
from chinchax.sweeps import spec as spec_lib
from chinchax.cli import flags
from chinchax.cli import sweep as cli_sweep
from chinchax.sweeps.train import loop

from tests.helpers import sweep_helper

URL = "gs://bucket/sweep"
GCS_HINT = "install the gcs extra: pip install 'chinchax[gcs]'"


def _watch_metrics_against_checkpoints(monkeypatch):
  """Fails a write of metrics.jsonl when the bucket's copy lacks a row of a saved step.

  A resumed run drops the rows past its checkpoint and writes them again, so every row up to
  a saved step must already be in the object; the 30 s flush is switched off to see that
  the run flushes on each save by itself.
  """
  monkeypatch.setattr(metrics, "FLUSH_EVERY_S", 1e9)
  saved, written = {}, {}
  save, write = checkpoint.Checkpointer.maybe_save, metrics.MetricsWriter.write

  def maybe_save(self, step, state, force=False, steps=1):
    done = save(self, step, state, force=force, steps=steps)
    run, folder = os.path.split(str(self._mgr.directory))
    if done and folder == "checkpoints":  # the ones a resume restores
      saved[run] = step
    return done

  def checked_write(self, step, **scalars):
    run = os.path.dirname(self.path)
    if run in saved:
      in_bucket = {r["step"] for r in records.read_metrics(self.path)}
      missing = {s for s in written.get(run, ()) if s <= saved[run]} - in_bucket
      assert not missing, f"{run}: rows {missing} not in the bucket after the checkpoint"
    written.setdefault(run, []).append(step)
    write(self, step, **scalars)

  monkeypatch.setattr(checkpoint.Checkpointer, "maybe_save", maybe_save)
  monkeypatch.setattr(metrics.MetricsWriter, "write", checked_write)
  return saved


class StopAfter:
  """A stop flag that turns true after `n` steps (train() asks once per step)."""

  def __init__(self, n: int):
    self.n, self.reason = n, "test"

  def __bool__(self) -> bool:
    self.n -= 1
    return self.n <= 0


@pytest.mark.slow
def test_tiny_sweep_trains_on_gcs_and_a_rerun_skips_it(fake_gcs, monkeypatch, capsys,  # noqa: F811
                                                       tiny_sweep_argv):
  saved = _watch_metrics_against_checkpoints(monkeypatch)
  argv = ["sweep", *tiny_sweep_argv(URL), "--quiet"]
  assert cli.run(argv) == 1  # trained; two runs are too few to fit
  out, err = capsys.readouterr()
  assert "2 of 2 cells to train" in out and "the fit failed: Approach 3" in err
  assert len(saved) == 2  # both cells checkpointed on gs://
  wd = fake_gcs.local(URL)

  recs = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  assert len(recs) == 2 and all(r["status"] == "done" for r in recs)
  for r in recs:
    cell = wd / r["name"]
    assert json.loads((cell / "result.json").read_text())["eval_loss"] == r["eval_loss"]
    assert json.loads((cell / "config.json").read_text())["name"] == r["name"]
    rows = [json.loads(l) for l in (cell / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == r["steps"] and rows[-1]["eval_loss"] == r["eval_loss"]
    assert any(f.name.startswith("events.out.tfevents") and f.stat().st_size > 100
               for f in (cell / "tensorboard").iterdir())
    final = cell / "checkpoints" / str(r["steps"])  # committed by a file, not a rename
    assert (final / "commit_success.txt").exists()
    assert (final / "default" / "manifest.ocdbt").exists()  # TensorStore's array data
  assert "The fit failed" in (wd / "report.md").read_text()
  assert json.loads((wd / "sweep.json").read_text())["name"] == "tiny"
  assert fake_gcs.stray_local_files() == []  # nothing local: no `gs:` folder

  stamps = {r["name"]: (wd / r["name"] / "result.json").stat().st_mtime_ns for r in recs}
  assert cli.run(argv) == 1
  out = capsys.readouterr().out
  assert out.count("skipped, already done") == 2 and "0 of 2 cells to train" in out
  assert {n: (wd / n / "result.json").stat().st_mtime_ns for n in stamps} == stamps
  assert fake_gcs.stray_local_files() == []

  # One cell again, stopped after 6 steps (a forced checkpoint) and resumed from the bucket:
  # the same losses as the sweep's uninterrupted run. A row past the checkpoint, as a run
  # that flushed and then died leaves, is dropped and written again.
  c = flags.parse_config_flags(tiny_sweep_argv(URL), "chinchax sweep",
                               cli_sweep.DEFAULT_CONFIG).config
  job = spec_lib.resolve(c, URL).jobs[0]
  job.config.log_every = 2  # rows before the stop, kept as they are by the resumed run
  run = f"{URL}-resume/{job.name}"
  # The flag is read at the end of each dispatch, and log_every = 2 ends one every 2 steps:
  # its third look is at step 6.
  assert loop.train(job.config, run, stop=StopAfter(3), quiet=True)["status"] == "stopped"
  stopped_rows = records.read_metrics(f"{run}/metrics.jsonl")
  with fake_gcs.local(f"{run}/metrics.jsonl").open("a") as f:
    f.write(json.dumps({"step": 7, "train_loss": 99.0}) + "\n")
  record = loop.train(job.config, run, stop=StopAfter(10**6))
  assert "resumed from step 6" in capsys.readouterr().out
  reference = next(r for r in recs if r["name"] == job.name)
  assert record["eval_loss"] == pytest.approx(reference["eval_loss"], abs=1e-6)
  assert record["train_loss"] == pytest.approx(reference["train_loss"], abs=1e-6)
  rows = records.read_metrics(f"{run}/metrics.jsonl")
  assert [r["step"] for r in stopped_rows] == [2, 4, 6] and rows[:3] == stopped_rows
  assert 99.0 not in [r.get("train_loss") for r in rows]
  assert [r["step"] for r in rows] == sorted(r["step"] for r in rows)
  assert fake_gcs.stray_local_files() == []


def test_sweep_on_gcs_fits_plots_and_reports(fake_gcs, monkeypatch, capsys):  # noqa: F811
  monkeypatch.setattr(loop, "train", sweep_helper.synthetic_train)
  argv = ["sweep", *sweep_helper.synthetic_argv(URL), "--config.bootstrap=0"]
  assert cli.run(argv) == 0
  wd = fake_gcs.local(URL)
  lines = [json.loads(l) for l in (wd / "runs.jsonl").read_text().splitlines()]
  assert [l["name"] for l in lines if l["status"] == "failed"] == [sweep_helper.FAILING_CELL]
  assert (wd / sweep_helper.FAILING_CELL / "result.json").exists()  # the failed record too

  law = law_lib.load_law(f"{URL}/law.json")  # read back through gs://
  assert law["law"]["alpha"] == pytest.approx(sweep_helper.TRUTH["alpha"], rel=1e-3)
  assert law["data"]["points"] == len(lines) - 1
  for stem in ("isoflops", "optimal", "law"):
    for fmt in ("png", "svg"):
      assert (wd / "plots" / f"{stem}.{fmt}").stat().st_size > 1000
  report = (wd / "report.md").read_text()
  for section in ("# Sweep report: sweep", "## Fitted law", "![law](plots/law.png)"):
    assert section in report

  # `chinchax report` rebuilds it from the bucket; `chinchax fit` reads and writes there too.
  (wd / "report.md").unlink()
  assert cli.run(["report", URL]) == 0
  assert (wd / "report.md").read_text() == report
  assert cli.run(["fit", URL, f"--out={URL}/refit.json", "--bootstrap=0", "--quiet"]) == 0
  assert law_lib.load_law(f"{URL}/refit.json")["law"] == law["law"]

  capsys.readouterr()
  assert cli.run(argv) == 0
  assert capsys.readouterr().out.count("skipped, already done") == len(lines) - 1
  assert fake_gcs.stray_local_files() == []


@pytest.mark.parametrize("argv, where", [
    (["sweep", f"--workdir={URL}"], f"--workdir={URL}"),
    (["train", f"--workdir={URL}"], f"--workdir={URL}"),
    (["eval", f"--workdir={URL}"], f"--workdir={URL}"),
    (["fit", URL], URL),
    (["fit", "runs.csv", f"--out={URL}/law.json"], f"--out={URL}/law.json"),
    (["report", URL], URL),
])
def test_gs_without_gcsfs_is_one_line_before_any_work(monkeypatch, capsys, argv, where):
  import fsspec  # pylint: disable=g-import-not-at-top

  def no_gcsfs(protocol):
    raise ImportError(f"Install gcsfs to access {protocol}")

  monkeypatch.setattr(fsspec, "get_filesystem_class", no_gcsfs)
  compiled = []
  monkeypatch.setattr(loop, "train", lambda *a, **k: compiled.append(a))
  assert cli.run(argv) == 2
  err = capsys.readouterr().err
  assert err.splitlines() == [f"chinchax {argv[0]}: error: {where}: {GCS_HINT}"]
  assert not compiled
