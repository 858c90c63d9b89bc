"""run_record: a damaged result.json reads as "not finished" with a warning naming it; a
damaged or stale runs.jsonl never blocks, and is rebuilt from the runs' records."""

import json
import logging

from chinchax.scaling.runs import records


def _record(name, loss=3.0, status="done"):
  return {"schema": records.SCHEMA, "name": name, "status": status, "eval_loss": loss}


def _write(run_dir, record):
  run_dir.mkdir(parents=True, exist_ok=True)
  records.write_result(str(run_dir), record)


def _lines(path):
  return [json.loads(l) for l in path.read_text().splitlines()]


def test_a_truncated_result_json_is_not_finished_with_a_warning_naming_it(tmp_path, caplog):
  _write(tmp_path / "a", _record("a"))
  path = tmp_path / "a" / "result.json"
  path.write_text(path.read_text()[:40])
  with caplog.at_level(logging.WARNING):
    assert records.read_result(str(tmp_path / "a")) is None
  (line,) = [r.getMessage() for r in caplog.records]
  assert line.startswith(f"{path} is not a valid run record (Unterminated string")
  assert line.endswith("the run counts as not finished and resumes from its checkpoints")


def test_json_that_is_not_a_record_is_not_finished(tmp_path, caplog):
  (tmp_path / "a").mkdir()
  for text in ("[]", '{"name": "a"}', "\xff\xfe"):
    (tmp_path / "a" / "result.json").write_bytes(text.encode("latin-1"))
    assert records.read_result(str(tmp_path / "a")) is None
  assert len(caplog.records) == 3
  assert records.read_result(str(tmp_path / "missing")) is None and len(caplog.records) == 3


def test_upsert_drops_damaged_lines_instead_of_failing(tmp_path):
  path = tmp_path / "runs.jsonl"
  path.write_text(json.dumps(_record("a")) + "\n" + '{"name": "b", "eval_lo\n')
  records.upsert_runs(str(path), _record("c", 2.0))
  assert _lines(path) == [_record("a"), _record("c", 2.0)]


def test_sync_rebuilds_runs_jsonl_from_the_records(tmp_path, caplog):
  for name, loss in (("a", 3.0), ("b", 2.5), ("c", 2.0)):
    _write(tmp_path / name, _record(name, loss))
  (tmp_path / "d").mkdir()  # a cell not finished: no record
  (tmp_path / "e").mkdir()
  (tmp_path / "e" / "result.json").write_text('{"name": "e", "sta')  # damaged: not finished
  path = tmp_path / "runs.jsonl"
  path.write_text("\n".join([
      json.dumps(_record("other", 9.0)),  # not one of these runs: kept as it is
      json.dumps(_record("a", 3.5)),      # stale: a's record says 3.0
      '{"name": "b", "ev',                # damaged
      json.dumps(_record("e", 1.0)),      # e's record is damaged: e is not finished
      json.dumps(_record("other", 9.0)),  # repeated
      json.dumps(_record("d", 1.0)),      # d has no record
  ]) + "\n")
  dirs = [str(tmp_path / n) for n in "abcde"]
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    records.sync_runs(str(path), dirs)
  assert _lines(path) == [_record("other", 9.0), _record("a", 3.0), _record("b", 2.5),
                          _record("c", 2.0)]
  rebuilt = [r.getMessage() for r in caplog.records if "disagreed" in r.getMessage()]
  assert rebuilt == [f"{path} disagreed with the runs' result.json files (1 damaged, 3 stale, "
                     "2 missing, 1 repeated lines); rebuilt from the records"]

  # Agreeing now: not rewritten, and only e's own warning again.
  inode = path.stat().st_ino
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    records.sync_runs(str(path), dirs)
  assert path.stat().st_ino == inode
  assert [r.getMessage().split(" is not")[0] for r in caplog.records] == [
      str(tmp_path / "e" / "result.json")]


def test_sync_writes_a_missing_runs_jsonl(tmp_path):
  _write(tmp_path / "a", _record("a"))
  path = tmp_path / "runs.jsonl"
  records.sync_runs(str(path), [str(tmp_path / "a"), str(tmp_path / "b")])
  assert _lines(path) == [_record("a")]


def test_runs_finished_since_the_index_was_written_are_added_quietly(tmp_path, caplog):
  """A sweep stopped after some WSD branches finished: their records exist, runs.jsonl lacks
  them. The next sweep adds them without a warning (nothing disagreed, the index is behind)."""
  for name, loss in (("a", 3.0), ("b", 2.5)):
    (tmp_path / name).mkdir()
    (tmp_path / name / "result.json").write_text(json.dumps(_record(name, loss)))
  path = tmp_path / "runs.jsonl"
  path.write_text(json.dumps(_record("a", 3.0)) + "\n")
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    records.sync_runs(str(path), [str(tmp_path / n) for n in "ab"])
  assert _lines(path) == [_record("a", 3.0), _record("b", 2.5)]
  assert not [r for r in caplog.records if "disagreed" in r.getMessage()]
