"""A sweep whose runs scored tasks ends with tasks.json, the task figures and report.md's
"Task accuracy" section (sweeps/report.py); a task fit that cannot be made is one line there
and removes a tasks.json of earlier runs."""

import json
import math

from chinchax.sweeps import report

# Six runs of three sizes, two token counts each, three evaluations a run: a known step 1
# L = 1.2 + 40/N^0.35 + 90/D^0.3 and step 2 acc = 0.25 + 0.5·sigmoid(-4·(L - 2.2)).
SIZES = (2e4, 4e4, 8e4)


def _truth(N, D):
  L = 1.2 + 40 / N**0.35 + 90 / D**0.3
  return L, 0.25 + 0.5 / (1 + math.exp(4 * (L - 2.2)))


def _record(i, N, D):
  evals = []
  for f in (0.25, 0.5, 1.0):
    L, acc = _truth(N, D * f)
    evals.append({"step": int(100 * f), "tokens": D * f, "loss": L, "accuracy": acc})
  return {"schema": "chinchax/run/v1", "name": f"r{i}", "status": "done", "N_total": N, "D": D,
          "budget": 6 * N * D, "eval_loss": evals[-1]["loss"],
          "shape": {"d_model": 32, "n_layers": 2},
          "tasks": {"next line": {"loss": evals[-1]["loss"], "accuracy": evals[-1]["accuracy"],
                                  "loss_unit": "bpb", "chance": 0.25, "items": 48,
                                  "sha256": "s", "evals": evals}}}


def _workdir(path, records):
  path.mkdir()
  (path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
  return str(path)


def test_the_sweep_fits_its_tasks_and_the_report_shows_both_steps(tmp_path, capsys):
  recs = [_record(i, N, D) for i, (N, D) in enumerate(
      (N, k * N) for N in SIZES for k in (10.0, 40.0))]
  wd = _workdir(tmp_path / "wd", recs)
  logged = []
  assert report.fit_tasks_workdir(wd, 20, logged.append) == str(tmp_path / "wd" / "tasks.json")
  assert logged == []
  doc = json.load(open(tmp_path / "wd" / "tasks.json"))
  s1, s2 = doc["tasks"]["next line"]["step1"], doc["tasks"]["next line"]["step2"]
  assert s1["runs"] == 6 and s2["evaluations"] == 18
  assert s2["floor"] == 0.25 and abs(s2["L0"] - 2.2) < 0.01 and abs(s2["k"] - 4) < 0.1
  assert (tmp_path / "wd" / "plots" / "task_next_line.png").exists()
  assert "step 1  L =" in capsys.readouterr().out

  text = open(report.write_report(wd)).read()
  section = text[text.index("## Task accuracy"):]
  assert "next line: 6 runs, 18 evaluations; loss in bits per byte" in section
  assert "step 1  L = " in section and "step 2  acc = 0.25 + " in section
  assert "![next line](plots/task_next_line.png)" in section


def test_a_task_fit_that_cannot_be_made_is_one_line_and_leaves_no_stale_tasks_json(tmp_path):
  wd = _workdir(tmp_path / "wd", [_record(0, 2e4, 4e5), _record(1, 4e4, 8e5)])
  (tmp_path / "wd" / "tasks.json").write_text("{}")  # an earlier study's
  logged = []
  assert report.fit_tasks_workdir(wd, 20, logged.append) is None
  assert len(logged) == 1 and "the task fit failed: " in logged[0] and "\n" not in logged[0]
  assert not (tmp_path / "wd" / "tasks.json").exists()
  text = open(report.write_report(wd)).read()
  line = text[text.index("## Task accuracy"):].splitlines()[2]
  assert line.startswith("The runs scored tasks, but no tasks.json: ")
  assert line.endswith("task 'next line' has 2 runs (r0, r1); step 1 fits five numbers per "
                       "task: give at least 5 runs of different sizes and token counts")


def test_runs_without_tasks_get_no_task_fit_nor_section(tmp_path):
  recs = [_record(i, N, 20 * N) for i, N in enumerate(SIZES)]
  for r in recs:
    del r["tasks"]
  wd = _workdir(tmp_path / "wd", recs)
  assert report.fit_tasks_workdir(wd, 20, print) is None
  assert "Task accuracy" not in open(report.write_report(wd)).read()
