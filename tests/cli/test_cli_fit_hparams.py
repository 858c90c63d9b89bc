"""`chinchax fit-hparams` and `chinchax plan --hparams` on a synthetic grid: output, the
artifact, and bad inputs as one line with exit status 2."""

import json
import math

import numpy as np
import pytest

from chinchax.scaling.hparams import file as hparams_file
from chinchax import cli
from tests.scaling import hparams_synthetic as S


def _write_csv(path, runs):
  lines = ["N,D,lr,batch_tokens,loss"] + [
      f"{r.N:.8g},{r.D:.8g},{r.lr:.8g},{r.B:.8g},{'nan' if math.isnan(r.loss) else r.loss}"
      for r in runs]
  path.write_text("\n".join(lines) + "\n")
  return path


@pytest.fixture(name="grid_csv", scope="module")
def _grid_csv(tmp_path_factory):
  return _write_csv(tmp_path_factory.mktemp("grid") / "grid.csv",
                    S.runs(np.random.default_rng(0)))


@pytest.fixture(name="good_text", scope="module")
def _good_text(grid_csv):
  out = grid_csv.parent / "good.json"
  assert cli.run(["fit-hparams", str(grid_csv), f"--out={out}", "--bootstrap=5"]) == 0
  return out.read_text()


def test_json_holds_both_laws_with_intervals_and_ranges(grid_csv, tmp_path, capsys):
  out = tmp_path / "hparams.json"
  assert cli.run(["fit-hparams", str(grid_csv), f"--out={out}", "--json",
                  "--bootstrap=100"]) == 0
  doc = json.loads(capsys.readouterr().out)
  assert set(doc["lr"]["exponents"]) == {"N", "D"} and set(doc["batch"]["exponents"]) == {"D"}
  for which in ("lr", "batch"):
    law = doc[which]
    for key in ("form", "coef", "exponents", "ci", "range", "warnings"):
      assert key in law
    for name, truth in S.TRUTH[which].items():
      lo, hi = law["ci"][name]
      assert lo <= truth <= hi, (which, name, law["ci"])
    assert "draws" not in law  # printed without the replicates; the file keeps them
  assert doc["lr"]["range"]["N"] == [pytest.approx(1e7), pytest.approx(1e8)]
  saved = hparams_file.load(out)
  assert len(saved["lr"]["draws"]) == 100
  assert saved["lr"]["exponents"] == doc["lr"]["exponents"]


def test_c_form_and_n_form(grid_csv, tmp_path, capsys):
  assert cli.run(["fit-hparams", str(grid_csv), f"--out={tmp_path}/h.json", "--json",
                  "--bootstrap=0", "--lr-vars=C", "--batch-vars=N,D"]) == 0
  doc = json.loads(capsys.readouterr().out)
  assert list(doc["lr"]["exponents"]) == ["C"] and list(doc["batch"]["exponents"]) == ["N", "D"]
  # B* depends on D alone: the N,D form finds N's exponent near zero.
  assert doc["batch"]["exponents"]["N"] == pytest.approx(0.0, abs=0.05)


def test_text_output_lists_points_and_laws(grid_csv, tmp_path, capsys):
  assert cli.run(["fit-hparams", str(grid_csv), f"--out={tmp_path}/h.json", "--bootstrap=20",
                  f"--plots={tmp_path}/plots"]) == 0
  out = capsys.readouterr().out
  assert out.count("interior") == 9 and "LR law:" in out and "batch law:" in out
  for stem in ("hparams_lr", "hparams_lr_law", "hparams_batch_law"):
    assert (tmp_path / "plots" / f"{stem}.png").stat().st_size > 1000


def test_plan_prints_lr_and_batch_with_intervals(grid_csv, tmp_path, capsys):
  out = tmp_path / "hparams.json"
  assert cli.run(["fit-hparams", str(grid_csv), f"--out={out}", "--bootstrap=200"]) == 0
  capsys.readouterr()
  assert cli.run(["plan", "--preset=hoffmann2022", "--flops=1e19", f"--hparams={out}",
                  "--json"]) == 0
  plan = json.loads(capsys.readouterr().out)
  N, D = plan["optimum"]["N"], plan["optimum"]["D"]
  doc = json.loads(out.read_text())
  assert doc["lr"]["vars"] == ["N", "D"] and doc["batch"]["vars"] == ["D"]
  for which, truth in (("lr", S.lr_opt(N, D)), ("batch", S.batch_opt(D))):
    law, h = doc[which], plan["hparams"][which]
    # c·N^p·D^q (the batch law: c·D^q) from the file's numbers, and the 5th-95th
    # percentiles of the same over its bootstrap rows [ln c, exponents...].
    x = np.array([1.0] + [math.log({"N": N, "D": D}[v]) for v in law["vars"]])
    want = law["coef"] * math.prod({"N": N, "D": D}[v]**law["exponents"][v]
                                   for v in law["vars"])
    assert h["value"] == pytest.approx(want, rel=1e-12)
    draws = np.array(law["draws"], np.float64)
    assert draws.shape == (200, len(x))
    assert h["ci"] == pytest.approx(np.percentile(np.exp(draws @ x), [5, 95]).tolist(),
                                    rel=1e-12)
    lo, hi = h["ci"]
    assert lo < h["value"] < hi and abs(math.log(h["value"] / truth)) < 0.1
  assert cli.run(["plan", "--preset=hoffmann2022", "--flops=1e19", f"--hparams={out}"]) == 0
  text = capsys.readouterr().out
  assert "peak LR" in text and "batch (tokens)" in text and "(90%)" in text


@pytest.mark.parametrize("edit, message", [
    (lambda t: t[:len(t) // 2], "is not valid JSON"),
    (lambda t: "", "is not valid JSON"),
    (lambda t: "[1, 2]", "not a JSON object"),
    (lambda t: t.replace('"chinchax/hparams/v1"', '"chinchax/law/v2"'), "schema"),
    (lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "lr"}), "lr"),
    (lambda t: t.replace('"coef": ', '"coef": -', 1), "must be positive"),
    (lambda t: json.dumps({**json.loads(t), "lr": {**json.loads(t)["lr"], "exponents": {}}}),
     "lr.exponents"),
])
def test_a_damaged_hparams_json_is_one_line(good_text, tmp_path, capsys, edit, message):
  bad = tmp_path / "bad.json"
  bad.write_text(edit(good_text))
  capsys.readouterr()
  assert cli.run(["plan", "--preset=hoffmann2022", "--flops=1e19", f"--hparams={bad}"]) == 2
  err = capsys.readouterr().err
  assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("text, argv, message", [
    ("N,D,lr,loss\n1,2,3,4\n", [], "missing column batch_tokens"),
    ("N,D,lr,batch_tokens,loss\n1e7,2e8,x,512,2.0\n", [], "lr is not a number"),
    ("N,D,lr,batch_tokens,loss\n1e7,2e8,-1,512,2.0\n", [], "lr must be a positive"),
    (None, ["--lr-vars=Q"], "--lr-vars='Q' is not one of"),
    (None, ["--bootstrap=-1"], "must be >= 0"),
])
def test_bad_inputs_are_one_line(grid_csv, tmp_path, capsys, text, argv, message):
  path = grid_csv if text is None else tmp_path / "bad.csv"
  if text is not None:
    path.write_text(text)
  out = tmp_path / "h.json"
  assert cli.run(["fit-hparams", str(path), f"--out={out}", *argv]) == 2
  err = capsys.readouterr().err
  assert message in err and len(err.strip().splitlines()) == 1
  assert not out.exists()
