"""The run reader: workdir, runs.jsonl and CSV agree; bad input is refused with its place."""

import csv
import json

import numpy as np
import pytest

from chinchax.errors import UserError
from chinchax.scaling.runs.table import budget_groups, load_runs, make_runs


# Five done runs at two budgets, one failed; every field the trainer writes.
RUNS = [
    # name, N_total, N_non_embedding, D, flops_chinchilla, loss, budget
    ("c1e15-a", 2.0e6, 1.5e6, 1e15 / 12e6, 1.1e15, 4.1, 1e15),
    ("c1e15-b", 4.0e6, 3.2e6, 1e15 / 24e6, 1.2e15, 3.9, 1e15),
    ("c1e15-c", 8.0e6, 6.8e6, 1e15 / 48e6, 1.3e15, 4.0, 1e15),
    ("c1e16-a", 8.0e6, 6.8e6, 1e16 / 48e6, 1.3e16, 3.6, 1e16),
    ("c1e16-b", 1.6e7, 1.4e7, 1e16 / 96e6, 1.2e16, 3.5, 1e16),
]


def _record(name, N, N_ne, D, flops_ch, loss, budget, status="done", curve=None):
  return {"schema": "chinchax/run/v1", "name": name, "status": status,
          "reason": None if status == "done" else "NaN loss at step 12", "budget": budget,
          "N_total": int(N), "N_non_embedding": int(N_ne), "D": D,
          "flops_6ND": 6 * N * D, "flops_chinchilla": flops_ch, "eval_loss": loss,
          "train_loss": loss + 0.01, "curve": curve, "schedule": "cosine",
          "shape": {"d_model": 64}, "hparams": {"lr": 3e-3}}


def _workdir(tmp_path):
  """A sweep workdir: runs.jsonl, a failed cell, and one run's metrics.jsonl."""
  wd = tmp_path / "sweep"
  wd.mkdir()
  records = [_record(*r, curve="metrics.jsonl" if r[0] == "c1e16-b" else None) for r in RUNS]
  records.insert(2, _record("c1e15-x", 3e6, 2e6, 1e8, 2e15, 9.9, 1e15, status="failed"))
  (wd / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
  (wd / "c1e16-b").mkdir()
  D_end = RUNS[4][3]
  lines = [{"step": 0, "tokens": 0.0, "train_loss": 11.0, "eval_loss": 10.9}]
  for step in range(1, 11):
    line = {"step": step, "tokens": D_end * step / 10, "flops": 0.0, "train_loss": 5 - step / 5}
    if step % 2 == 0:
      line["eval_loss"] = 5.0 - step / 5
    lines.append(line)
  (wd / "c1e16-b" / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
  return wd


def _csv(path, header, rows):
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(rows)
  return str(path)


def _same(r1, r2, names=True):
  for field in ("N", "D", "C", "loss", "budget"):
    np.testing.assert_allclose(getattr(r1, field), getattr(r2, field), rtol=1e-12,
                               err_msg=field)
  if names:
    assert r1.name == r2.name


def test_workdir_jsonl_and_csvs_give_the_same_runs(tmp_path):
  wd = _workdir(tmp_path)
  from_dir = load_runs([str(wd)])
  from_jsonl = load_runs([str(wd / "runs.jsonl")])
  by_D = _csv(tmp_path / "d.csv", ["run", "N", "D", "loss", "budget"],
              [(n, N, D, L, b) for n, N, _, D, _, L, b in RUNS])
  by_C = _csv(tmp_path / "c.csv", ["run", "N", "C", "loss", "budget"],
              [(n, N, 6 * N * D, L, b) for n, N, _, D, _, L, b in RUNS])
  _same(from_dir, from_jsonl)
  _same(from_dir, load_runs([by_D]))
  _same(from_dir, load_runs([by_C]))
  # Independent of the reader: the table itself.
  np.testing.assert_array_equal(from_dir.N, [r[1] for r in RUNS])
  np.testing.assert_allclose(from_dir.C, [6 * r[1] * r[3] for r in RUNS], rtol=1e-12)
  assert (from_dir.params, from_dir.flops, len(from_dir)) == ("total", "6ND", 5)


def test_failed_runs_are_skipped_and_counted(tmp_path):
  runs = load_runs([str(_workdir(tmp_path))])
  assert "c1e15-x" not in runs.name
  assert runs.n_failed == 1
  rows = [(n, N, D, L, "done") for n, N, _, D, _, L, _ in RUNS] + [("bad", 1e6, 1e9, 1.0,
                                                                     "failed")]
  path = _csv(tmp_path / "s.csv", ["run", "N", "D", "loss", "status"], rows)
  from_csv = load_runs([path])
  assert from_csv.n_failed == 1 and "bad" not in from_csv.name


def test_all_failed_is_refused(tmp_path):
  path = tmp_path / "runs.jsonl"
  path.write_text(json.dumps(_record("x", 1e6, 1e6, 1e9, 1e16, 3.0, None, "failed")) + "\n")
  with pytest.raises(UserError, match="no usable runs.*1 failed"):
    load_runs([str(path)])


def test_conventions_pick_the_record_fields(tmp_path):
  wd = _workdir(tmp_path)
  ne = load_runs([str(wd)], params="non_embedding")
  np.testing.assert_array_equal(ne.N, [r[2] for r in RUNS])
  np.testing.assert_allclose(ne.C, [6 * r[2] * r[3] for r in RUNS], rtol=1e-12)
  ch = load_runs([str(wd)], flops="chinchilla")
  np.testing.assert_array_equal(ch.C, [r[4] for r in RUNS])
  assert (ne.params, ch.flops) == ("non_embedding", "chinchilla")
  with pytest.raises(UserError, match="params convention"):
    load_runs([str(wd)], params="embedding")
  with pytest.raises(UserError, match="FLOPs convention"):
    load_runs([str(wd)], flops="4ND")


def test_curve_is_read_from_metrics(tmp_path):
  runs = load_runs([str(_workdir(tmp_path))])
  (curve,) = runs.curves
  assert curve.name == "c1e16-b" and curve.N == 1.6e7
  D_end = RUNS[4][3]
  steps = np.array([2, 4, 6, 8, 10])  # eval steps; the step-0 eval has no C and is left out
  np.testing.assert_allclose(curve.D, D_end * steps / 10, rtol=1e-12)
  np.testing.assert_allclose(curve.C, 6 * 1.6e7 * D_end * steps / 10, rtol=1e-12)
  np.testing.assert_allclose(curve.loss, 5.0 - steps / 5, rtol=1e-12)


def test_a_rerun_replaces_the_earlier_record(tmp_path):
  path = tmp_path / "runs.jsonl"
  first = _record("a", 1e6, 1e6, 1e9, 1e16, 3.0, None, status="failed")
  second = _record("a", 1e6, 1e6, 1e9, 1e16, 2.5, None)
  other = _record("b", 2e6, 2e6, 1e9, 1e16, 2.7, None)
  path.write_text("".join(json.dumps(r) + "\n" for r in (first, other, second)))
  runs = load_runs([str(path)])
  assert runs.name == ("a", "b") and runs.n_failed == 0  # in the order of their names
  np.testing.assert_array_equal(runs.loss, [2.5, 2.7])


def test_several_paths_concatenate_with_unique_names(tmp_path):
  wd = _workdir(tmp_path)
  runs = load_runs([str(wd), str(wd / "runs.jsonl")])
  assert len(runs) == 10 and len(set(runs.name)) == 10
  assert len(runs.curves) == 2 and {c.name for c in runs.curves} <= set(runs.name)
  assert runs.n_failed == 2


@pytest.mark.parametrize("header,row,match", [
    (["N", "D"], [1e6, 1e9], r"missing column 'loss'"),
    (["N", "loss"], [1e6, 3.0], r"needs a column 'D' .* or 'C'"),
    (["N", "D", "loss"], [1e6, 1e9, "0"], r":3: loss must be a positive finite.*status=failed"),
    (["N", "D", "loss"], [1e6, "inf", 3.0], r":3: D must be a positive finite"),
    (["N", "D", "loss"], [-1e6, 1e9, 3.0], r":3: N must be a positive finite"),
    (["N", "D", "loss"], ["big", 1e9, 3.0], r":3: N is not a number: 'big'"),
    (["N", "D", "C", "loss"], [1e6, "", "", 3.0], r":3: neither D nor C"),
    (["N", "D", "loss", "U"], [1e6, 1e9, 3.0, "-5"], r":3: U must be a positive finite"),
])
def test_bad_csv_is_refused_naming_the_row(tmp_path, header, row, match):
  good = {"N": 1e6, "D": 1e9, "C": 6e15, "loss": 3.0, "U": 1e9}
  path = _csv(tmp_path / "bad.csv", header, [[good[h] for h in header], row])
  with pytest.raises(UserError, match=match) as e:
    load_runs([path])
  assert str(e.value).startswith(path) and "\n" not in str(e.value)


def test_unreadable_inputs_are_refused(tmp_path):
  empty = _csv(tmp_path / "empty.csv", ["N", "D", "loss"], [])
  with pytest.raises(UserError, match="no rows"):
    load_runs([empty])
  with pytest.raises(UserError, match="no such file"):
    load_runs([str(tmp_path / "missing.csv")])
  with pytest.raises(UserError, match="runs.jsonl.*not found"):
    load_runs([str(tmp_path)])
  (tmp_path / "x.txt").write_text("N,D,loss\n")
  with pytest.raises(UserError, match="cannot read this as runs"):
    load_runs([str(tmp_path / "x.txt")])
  (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00N")
  with pytest.raises(UserError, match="bin.csv: cannot read as CSV"):
    load_runs([str(tmp_path / "bin.csv")])
  bad = tmp_path / "bad.jsonl"
  bad.write_text(json.dumps(_record(*RUNS[0])) + "\n{not json\n")
  with pytest.raises(UserError, match=r"bad.jsonl:2: not valid JSON"):
    load_runs([str(bad)])
  bad.write_text(json.dumps({**_record(*RUNS[0]), "schema": "other/v9"}) + "\n")
  with pytest.raises(UserError, match=r"bad.jsonl:1: schema"):
    load_runs([str(bad)])
  bad.write_text(json.dumps({**_record(*RUNS[0]), "eval_loss": None}) + "\n")
  with pytest.raises(UserError, match=r"bad.jsonl:1 \(c1e15-a\): eval_loss is not a number"):
    load_runs([str(bad)])


def test_csv_without_budget_is_grouped_by_C(tmp_path):
  rng = np.random.default_rng(0)
  budgets = np.array([1e17, 3e17, 1e18, 3e18, 1e19])
  C = np.repeat(budgets, 4) * (1 + rng.uniform(-0.02, 0.02, 20))  # within 2% of nominal
  N = np.tile([1e7, 2e7, 4e7, 8e7], 5)
  runs = make_runs(N, C=C, loss=np.full(20, 3.0))
  groups = budget_groups(runs)
  assert [sorted(g.tolist()) for g in groups] == [list(range(4 * i, 4 * i + 4))
                                                  for i in range(5)]
  # A run with a nominal budget takes in the unlabelled runs of about its C.
  labelled = make_runs(N, C=C, loss=np.full(20, 3.0),
                       budget=[1e18 if i == 9 else np.nan for i in range(20)])
  assert [sorted(g.tolist()) for g in budget_groups(labelled)] == [
      sorted(g.tolist()) for g in groups]


def test_groups_follow_the_nominal_budget_over_C():
  # Nominal budgets win over C: two groups whose C overlap stay apart.
  runs = make_runs([1e6, 2e6, 3e6, 4e6], C=[1e15, 1.01e15, 1.02e15, 1.03e15],
                   loss=[3, 3, 3, 3], budget=[1e15, 2e15, 1e15, 2e15])
  assert sorted(map(list, budget_groups(runs))) == [[0, 2], [1, 3]]


def test_subset_keeps_repeats_and_their_curves(tmp_path):
  runs = load_runs([str(_workdir(tmp_path))])
  sub = runs.subset([4, 4, 0])
  assert sub.name == ("c1e16-b", "c1e16-b", "c1e15-a")
  np.testing.assert_array_equal(sub.N, runs.N[[4, 4, 0]])
  assert len(sub.curves) == 2 and len(sub) == 3
  assert len(runs.subset(runs.N > 5e6)) == 3


def test_a_gs_workdir_and_csv_read_like_local_ones(fake_gcs):  # noqa: F811
  (fake_gcs.root / "bkt").mkdir()
  local = _workdir(fake_gcs.root / "bkt")  # gs://bkt/sweep
  from_gs, from_local = load_runs(["gs://bkt/sweep"]), load_runs([str(local)])
  _same(from_gs, from_local)
  assert [c.name for c in from_gs.curves] == ["c1e16-b"]  # metrics.jsonl read from the bucket
  np.testing.assert_array_equal(from_gs.curves[0].loss, from_local.curves[0].loss)
  _csv(fake_gcs.root / "bkt" / "d.csv", ["run", "N", "D", "loss", "budget"],
       [(n, N, D, L, b) for n, N, _, D, _, L, b in RUNS])
  _same(load_runs(["gs://bkt/d.csv"]), from_local)
  with pytest.raises(UserError, match="gs://bkt/none: no such file or folder"):
    load_runs(["gs://bkt/none"])


def test_unique_tokens_from_records_csv_and_arrays(tmp_path):
  """U is a record's `unique_tokens` or a CSV's U column; runs with D > U repeat data."""
  path = tmp_path / "runs.jsonl"
  recs = [dict(_record(*r), unique_tokens=u) for r, u in zip(RUNS, (1e7, 1e9, None, 1e9, 1e6))]
  path.write_text("".join(json.dumps(r) + "\n" for r in recs))
  runs = load_runs([str(path)])
  np.testing.assert_array_equal(runs.U, [1e7, 1e9, np.nan, 1e9, 1e6])
  D = np.array([r[3] for r in RUNS])
  assert runs.repeats.tolist() == [bool(d > u) for d, u in zip(D, (1e7, 1e9, np.inf, 1e9,
                                                                     1e6))]
  assert runs.subset([4, 0]).U.tolist() == [1e6, 1e7]
  csv_path = _csv(tmp_path / "u.csv", ["N", "D", "loss", "U"],
                  [(N, D, L, u) for (_, N, _, D, _, L, _), u in zip(RUNS, (1e7, 1e9, "", 1e9,
                                                                            1e6))])
  np.testing.assert_array_equal(load_runs([csv_path]).U, runs.U)
  assert load_runs([str(_workdir(tmp_path))]).U is None  # no record says: none known
  assert not make_runs([1e6], [1e9], [3.0]).repeats.any()
  assert make_runs([1e6, 2e6], [1e9, 1e9], [3.0, 2.9], U=[2e9, 5e8]).repeats.tolist() == [
      False, True]
  with pytest.raises(UserError, match="U of run 'run1' must be positive"):
    make_runs([1e6, 2e6], [1e9, 1e9], [3.0, 2.9], U=[2e9, 0.0])


def test_the_same_runs_in_another_order_give_the_same_table_and_law(tmp_path):
  """runs.jsonl lists runs as they finished, which varies from one sweep of a grid to the
  next (cells two at a time, WSD branches as pieces): its rows are read in the order of their
  names, so the bootstrap draws the same runs and law.json comes out the same."""
  import chinchax  # pylint: disable=g-import-not-at-top
  E, A, B, alpha, beta = 1.69, 406.4, 410.7, 0.34, 0.28  # Hoffmann et al. 2022
  noise = np.random.default_rng(0).normal(0, 0.01, 15)
  recs = []
  for i, (C, N) in enumerate((C, C ** 0.5 / 8 * f) for C in (1e18, 1e19, 1e20)
                             for f in (0.25, 0.5, 1, 2, 4)):
    D = C / (6 * N)
    loss = (E + A / N ** alpha + B / D ** beta) * np.exp(noise[i])
    recs.append(_record(f"C{C:.0e}-N{N:.3g}", N, N, D, C, float(loss), C))
  laws, tables = [], []
  for order in (recs, recs[::-1], recs[5:] + recs[:5]):
    wd = tmp_path / f"wd{len(laws)}"
    wd.mkdir()
    (wd / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in order))
    tables.append(load_runs([str(wd)]))
    chinchax.fit(str(wd), approaches="2", bootstrap=60, out=str(wd / "law.json"))
    law = json.loads((wd / "law.json").read_text())
    laws.append((law["approaches"]["2"]["ci"], law["approaches"]["2"]["bootstrap"]))
  assert list(tables[0].name) == sorted(r["name"] for r in recs)
  for t in tables[1:]:
    _same(tables[0], t)
  assert laws[0] == laws[1] == laws[2]
