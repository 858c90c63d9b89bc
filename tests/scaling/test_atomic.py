"""scaling.atomic: the same calls on a local disk and on gs:// (tests/fake_gcs.py's bucket)."""

import json
import os

import pytest

from chinchax.scaling import atomic
from chinchax.scaling.errors import UserError
from chinchax.sweeps import run_record



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
  run_record.upsert_runs_jsonl(path, {"name": "a", "eval_loss": 3.0})
  run_record.upsert_runs_jsonl(path, {"name": "b", "eval_loss": 2.0})
  run_record.upsert_runs_jsonl(path, {"name": "a", "eval_loss": 1.0})  # a rerun replaces it
  lines = [json.loads(l) for l in fake_gcs.local(path).read_text().splitlines()]
  assert lines == [{"name": "b", "eval_loss": 2.0}, {"name": "a", "eval_loss": 1.0}]
  assert run_record.read_result("gs://bkt/sweep/a") is None
  run_record.write_result("gs://bkt/sweep/a", {"name": "a", "status": "done"})
  assert run_record.read_result("gs://bkt/sweep/a") == {"name": "a", "status": "done"}
  assert fake_gcs.stray_local_files() == []
