"""metrics.jsonl: appended per step (rewritten whole on gs://), trimmed to the restored step on
resume; TensorBoard events beside it."""

import json
import os

from chinchax.scaling.runs import records
from chinchax.sweeps.train import metrics


RUN = "gs://bkt/run"


def test_resume_drops_lines_past_the_checkpoint(tmp_path):
  w = metrics.MetricsWriter(str(tmp_path), tensorboard=False)
  for step in (1, 2, 3, 4):
    w.write(step, train_loss=5.0 - step, lr=float("nan"))
  w.close()
  rows = records.read_metrics(w.path)
  assert [r["step"] for r in rows] == [1, 2, 3, 4]
  assert rows[0]["lr"] is None  # non-finite values become null, JSON stays valid

  with open(w.path, "a") as f:
    f.write('{"step": 5, "train_lo')  # a torn line from a crash
  w2 = metrics.MetricsWriter(str(tmp_path), resume_step=2, tensorboard=False)
  w2.write(3, train_loss=2.0)
  assert [r["step"] for r in records.read_metrics(w2.path)] == [1, 2, 3]
  with open(w2.path) as f:
    assert all(json.loads(line) for line in f)


def test_tensorboard_events_written(tmp_path):
  w = metrics.MetricsWriter(str(tmp_path))
  w.write(1, train_loss=1.5)
  w.close()
  files = os.listdir(tmp_path / "tensorboard")
  assert any(f.startswith("events.out.tfevents") for f in files)


def _steps_in_bucket(bucket) -> list[int]:
  text = bucket.local(f"{RUN}/metrics.jsonl").read_text()
  return [json.loads(line)["step"] for line in text.splitlines()]


def test_gs_rows_reach_the_bucket_on_flush_and_close(fake_gcs):  # noqa: F811
  w = metrics.MetricsWriter(RUN, tensorboard=False)
  w.write(1, train_loss=3.0)
  w.write(2, train_loss=2.5)
  assert _steps_in_bucket(fake_gcs) == []  # no append on GCS: held until a flush
  w.flush()
  assert _steps_in_bucket(fake_gcs) == [1, 2]
  w.write(3, train_loss=2.0)  # within FLUSH_EVERY_S of the flush: held
  assert _steps_in_bucket(fake_gcs) == [1, 2]
  w.close()
  assert [r["step"] for r in records.read_metrics(w.path)] == [1, 2, 3]
  assert fake_gcs.stray_local_files() == []


def test_gs_write_flushes_once_FLUSH_EVERY_S_passed(fake_gcs, monkeypatch):  # noqa: F811
  now = [1000.0]
  monkeypatch.setattr(metrics.time, "monotonic", lambda: now[0])
  w = metrics.MetricsWriter(RUN, tensorboard=False)
  w.write(1, train_loss=3.0)
  now[0] += metrics.FLUSH_EVERY_S - 1
  w.write(2, train_loss=2.5)
  assert _steps_in_bucket(fake_gcs) == []
  now[0] += 1
  w.write(3, train_loss=2.0)
  assert _steps_in_bucket(fake_gcs) == [1, 2, 3]
  w.write(4, train_loss=1.5)  # the clock starts again at that flush
  assert _steps_in_bucket(fake_gcs) == [1, 2, 3]
  w.close()
  assert _steps_in_bucket(fake_gcs) == [1, 2, 3, 4]


def test_gs_resume_drops_rows_past_the_checkpoint(fake_gcs):  # noqa: F811
  w = metrics.MetricsWriter(RUN, tensorboard=False)
  for step in (1, 2, 3, 4):
    w.write(step, train_loss=5.0 - step)
  w.close()
  w2 = metrics.MetricsWriter(RUN, resume_step=2, tensorboard=False)
  assert _steps_in_bucket(fake_gcs) == [1, 2]  # trimmed at once, before any new row
  w2.write(3, train_loss=2.0)
  w2.close()
  rows = records.read_metrics(w2.path)
  assert [r["step"] for r in rows] == [1, 2, 3] and rows[2]["train_loss"] == 2.0


def test_gs_tensorboard_events_go_through_the_bucket(fake_gcs):  # noqa: F811
  w = metrics.MetricsWriter(RUN)
  w.write(1, train_loss=1.5)
  w.close()
  (events,) = fake_gcs.local(f"{RUN}/tensorboard").iterdir()
  assert events.name.startswith("events.out.tfevents")
  assert b"train_loss" in events.read_bytes()  # the scalar's tag, in the rewritten object
  assert fake_gcs.stray_local_files() == []


def _lines(n: int) -> str:
  return "".join(json.dumps({"step": s, "train_loss": 5.0 - s}) + "\n" for s in range(1, n + 1))


def test_resume_cuts_back_to_the_restored_step_only(tmp_path):
  path = tmp_path / "metrics.jsonl"
  # A torn line (a crash mid-append) among rows, rows past the checkpoint after it.
  path.write_text(_lines(3) + '{"step": 4, "train_lo\n' + _lines(6)[len(_lines(4)):])
  w = metrics.MetricsWriter(str(tmp_path), resume_step=5, tensorboard=False)
  w.close()
  assert [r["step"] for r in records.read_metrics(str(path))] == [1, 2, 3, 5]
  assert path.read_text() == _lines(3) + json.dumps({"step": 5, "train_loss": 0.0}) + "\n"


def test_nothing_to_cut_leaves_the_file_as_it_is(tmp_path):
  path = tmp_path / "metrics.jsonl"
  path.write_text(_lines(4))
  inode = path.stat().st_ino
  metrics.MetricsWriter(str(tmp_path), resume_step=4, tensorboard=False).close()
  assert path.stat().st_ino == inode and path.read_text() == _lines(4)  # appended to, not rewritten


def test_a_row_of_the_restored_step_already_there_is_not_written_twice(tmp_path):
  # A run killed after its final checkpoint (step 4) and final eval row, before result.json:
  # the rerun restores step 4 and evaluates again.
  path = tmp_path / "metrics.jsonl"
  path.write_text(_lines(4) + json.dumps({"step": 4, "tokens": 64, "eval_loss": 1.5}) + "\n")
  before = path.read_text()
  w = metrics.MetricsWriter(str(tmp_path), resume_step=4, tensorboard=False)
  w.write(4, tokens=64, eval_loss=1.5)
  assert path.read_text() == before
  w.write(4, tokens=64, eval_loss=1.5)  # a second one is new: written
  w.write(4, tokens=64, probe=2.0)      # other keys: written
  w.close()
  assert [sorted(r) for r in records.read_metrics(str(path))][-2:] == [
      ["eval_loss", "step", "tokens"], ["probe", "step", "tokens"]]
  assert len(records.read_metrics(str(path))) == 7
