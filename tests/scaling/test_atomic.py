"""scaling.atomic: the same calls on a local disk and on gs:// (tests/fake_gcs.py's bucket)."""

import json
import os

import pytest

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.runs import records



def test_local_write_is_a_rename_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "a" / "b.json"
  atomic.write_json(path, {"x": 1})
  assert atomic.read_text(path) == '{\n  "x": 1\n}\n'
  assert os.listdir(tmp_path / "a") == ["b.json"]
  assert atomic.read_text(tmp_path / "missing.txt") is None
  assert atomic.absolute("rel") == os.path.join(os.getcwd(), "rel")


def test_gs_write_read_exists_listdir(fake_gcs):  # noqa: F811
  url = "gs://bkt/run/x/result.json"
  assert not atomic.exists(url) and atomic.read_text(url) is None
  atomic.makedirs("gs://bkt/run/x")
  atomic.write_json(url, {"loss": 2.5})
  atomic.write_bytes("gs://bkt/run/y.bin", b"\x00\x01")
  assert fake_gcs.local(url).read_text() == '{\n  "loss": 2.5\n}\n'
  assert atomic.read_text(url) == fake_gcs.local(url).read_text()
  assert atomic.read_bytes("gs://bkt/run/y.bin") == b"\x00\x01"
  assert atomic.exists(url) and atomic.isdir("gs://bkt/run") and not atomic.isdir(url)
  assert atomic.listdir("gs://bkt/run") == ["x", "y.bin"]
  assert atomic.listdir("gs://bkt/nothing") == []
  atomic.write_text(url, "replaced")  # a whole-object rewrite, no rename involved
  assert atomic.read_text(url) == "replaced"
  assert atomic.absolute("gs://bkt/run") == "gs://bkt/run"  # os.path.abspath would mangle it
  assert fake_gcs.stray_local_files() == []


def test_fake_bucket_refuses_rename(fake_gcs):  # noqa: F811
  from etils import epath  # pylint: disable=g-import-not-at-top
  atomic.write_text("gs://bkt/a", "x")
  with pytest.raises(OSError, match="no rename"):
    epath.Path("gs://bkt/a").rename("gs://bkt/b")


def test_gs_without_gcsfs_is_one_line(monkeypatch):
  import fsspec  # pylint: disable=g-import-not-at-top

  def missing(protocol):
    raise ImportError("Install gcsfs to access Google Storage")

  monkeypatch.setattr(fsspec, "get_filesystem_class", missing)
  with pytest.raises(UserError) as e:
    atomic.check_backend("gs://b/sweep")
  assert str(e.value) == ("--workdir=gs://b/sweep: install the gcs extra: "
                          "pip install 'chinchax[gcs]'")
  atomic.check_backend("/tmp/local")  # a local path needs nothing


def test_run_record_upserts_runs_jsonl_on_gs(fake_gcs):  # noqa: F811
  path = "gs://bkt/sweep/runs.jsonl"
  records.upsert_runs(path, {"name": "a", "eval_loss": 3.0})
  records.upsert_runs(path, {"name": "b", "eval_loss": 2.0})
  records.upsert_runs(path, {"name": "a", "eval_loss": 1.0})  # a rerun replaces it
  lines = [json.loads(l) for l in fake_gcs.local(path).read_text().splitlines()]
  assert lines == [{"name": "b", "eval_loss": 2.0}, {"name": "a", "eval_loss": 1.0}]
  assert records.read_result("gs://bkt/sweep/a") is None
  records.write_result("gs://bkt/sweep/a", {"name": "a", "status": "done"})
  assert records.read_result("gs://bkt/sweep/a") == {"name": "a", "status": "done"}
  assert fake_gcs.stray_local_files() == []


# --------------------------------------------------------------------------- gs:// faults


@pytest.fixture
def waits(monkeypatch):
  """The backoff's waits, recorded instead of slept."""
  slept = []
  monkeypatch.setattr(atomic, "_sleep", slept.append)
  return slept


def _check_backoff(slept):
  for k, s in enumerate(slept):  # jittered exponential: base 2^k, times 0.5 to 1.5, capped
    base = min(atomic.BACKOFF_MAX_S, atomic.BACKOFF_S * 2**k)
    assert 0.5 * base <= s <= 1.5 * base, (k, s)


def test_gs_transient_faults_are_retried_with_backoff(fake_gcs, waits, caplog):  # noqa: F811
  url = "gs://bkt/run/result.json"
  atomic.write_json(url, {"v": 1})
  fake_gcs.faults.add("read", "result.json", times=2)
  assert json.loads(atomic.read_text(url)) == {"v": 1}
  fake_gcs.faults.add("write", "result.json", times=4, code=429)
  atomic.write_json(url, {"v": 2})
  fake_gcs.faults.add("list", "run", times=1, code=500)
  assert atomic.listdir("gs://bkt/run") == ["result.json"]
  assert json.loads(fake_gcs.local(url).read_text()) == {"v": 2}
  assert [op for op, _ in fake_gcs.faults.raised] == ["read"] * 2 + ["write"] * 4 + ["list"]
  assert len(waits) == 7
  _check_backoff(waits[:2])
  _check_backoff(waits[2:6])
  assert len(set(waits)) == 7  # jittered
  assert sum("try 2 of 5" in r.getMessage() for r in caplog.records) == 3


def test_gs_persistent_fault_is_one_line_naming_the_path_and_the_object_is_intact(
    fake_gcs, waits):  # noqa: F811
  url = "gs://bkt/sweep/runs.jsonl"
  atomic.write_text(url, '{"name": "a"}\n')
  fake_gcs.faults.add("write", "runs.jsonl")
  with pytest.raises(atomic.StorageError) as e:
    atomic.write_text(url, '{"name": "a"}\n{"name": "b"}\n')
  assert isinstance(e.value, UserError) and "\n" not in str(e.value)
  assert str(e.value).startswith(f"{url}: could not write after 5 tries over ")
  assert str(e.value).endswith("(HttpError: fake gs://: 503 on write of gs://bkt/sweep/runs.jsonl); "
                               "check the bucket and the network, then rerun: the run resumes "
                               "where it stopped")
  assert len(fake_gcs.faults.raised) == atomic.TRIES and len(waits) == atomic.TRIES - 1
  _check_backoff(waits)
  assert fake_gcs.local(url).read_text() == '{"name": "a"}\n'  # never half-written
  assert sorted(p.name for p in fake_gcs.local("gs://bkt/sweep").iterdir()) == ["runs.jsonl"]


def test_gs_permanent_error_is_not_retried(fake_gcs, waits):  # noqa: F811
  fake_gcs.faults.add("read", "secret", code=403)
  with pytest.raises(atomic.StorageError, match=r"^gs://bkt/secret: could not read \(HttpError"):
    atomic.read_bytes("gs://bkt/secret")
  assert waits == [] and len(fake_gcs.faults.raised) == 1


def test_local_errors_are_not_retried(tmp_path, waits):
  (tmp_path / "f").write_text("x")
  with pytest.raises(UserError, match="not a folder"):  # a file where a folder must be
    atomic.write_text(tmp_path / "f" / "g", "y")
  assert waits == []


def test_an_interrupted_local_write_leaves_the_old_file(tmp_path, monkeypatch):
  path = tmp_path / "result.json"
  atomic.write_json(path, {"v": 1})

  def crash(*_):
    raise KeyboardInterrupt  # what a signal arriving mid-write raises

  monkeypatch.setattr(atomic.os, "fsync", crash)
  with pytest.raises(KeyboardInterrupt):
    atomic.write_json(path, {"v": 2, "pad": "x" * 10000})
  assert json.loads(path.read_text()) == {"v": 1}
  assert os.listdir(tmp_path) == ["result.json"]  # no temporary left either
