"""Plots: each writes a real PNG and SVG, atomically, and nothing when it fails."""

import os

import numpy as np
import pytest

from chinchax.scaling.plots import canvas, law as plots
from chinchax.errors import UserError
from chinchax.scaling.isoflop.fit import fit_isoflop
from chinchax.scaling.isoflop.bootstrap import bootstrap_isoflop
from chinchax.scaling.runs.table import make_runs


E, A, B, ALPHA, BETA = 1.69, 406.4, 410.7, 0.34, 0.28
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _isoflop_runs():
  a = BETA / (ALPHA + BETA)
  G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))
  budgets = np.logspace(17, 20, 4)
  N = np.concatenate([G * (C / 6) ** a * np.geomspace(0.2, 5, 7) for C in budgets])
  N[:7] *= 30  # the first budget's minimum lies below its sizes: drawn as dropped
  C = np.repeat(budgets, 7)
  D = C / (6 * N)
  loss = E + A / N**ALPHA + B / D**BETA
  return make_runs(N, D, loss + 0.003 * np.random.default_rng(0).standard_normal(len(N)),
                   budget=C)


def _check(paths, stem):
  assert paths == [f"{stem}.png", f"{stem}.svg"]
  with open(paths[0], "rb") as f:
    png = f.read()
  with open(paths[1], "rb") as f:
    svg = f.read()
  assert png.startswith(PNG_SIGNATURE) and len(png) > 1000
  assert b"<svg" in svg[:2000] and svg.rstrip().endswith(b"</svg>")
  folder = os.path.dirname(stem)
  assert not [n for n in os.listdir(folder) if n.startswith(".tmp-")]


def test_all_plots_write_png_and_svg(tmp_path):
  runs = _isoflop_runs()
  with pytest.warns(UserWarning, match="dropped"):
    fit = fit_isoflop(runs)
  stem = str(tmp_path / "figs" / "isoflops")  # the folder is made
  _check(plots.plot_isoflops(runs, fit, stem), stem)

  samples = bootstrap_isoflop(runs, n_resamples=50, seed=0)
  parametric = {"a": BETA / (ALPHA + BETA), "b": ALPHA / (ALPHA + BETA),
                "log_kN": -0.5, "log_kD": -1.29}  # no points: a line only
  stem = str(tmp_path / "figs" / "optimal")
  _check(plots.plot_optimal({"Approach 2": fit.to_dict(), "Approach 3": parametric}, stem,
                            samples={"Approach 2": samples}), stem)

  stem = str(tmp_path / "figs" / "law")
  _check(plots.plot_law(stem, E=E, A=A, B=B, alpha=ALPHA, beta=BETA, N=runs.N, D=runs.D,
                        budgets=fit.budgets), stem)
  assert sorted(os.listdir(tmp_path / "figs")) == [
      "isoflops.png", "isoflops.svg", "law.png", "law.svg", "optimal.png", "optimal.svg"]


def test_a_failed_render_writes_nothing(tmp_path, monkeypatch):
  # The SVG fails to render after the PNG has: neither file may appear.
  monkeypatch.setattr(canvas, "FORMATS", ("png", "no-such-format"))
  with pytest.raises(ValueError):
    plots.plot_law(str(tmp_path / "law"), E=E, A=A, B=B, alpha=ALPHA, beta=BETA)
  assert os.listdir(tmp_path) == []


def test_bad_input_is_refused_before_writing(tmp_path):
  with pytest.raises(UserError, match="alpha must be positive"):
    plots.plot_law(str(tmp_path / "law"), E=E, A=A, B=B, alpha=-0.3, beta=BETA)
  with pytest.raises(UserError, match="needs C_range"):
    plots.plot_optimal({"x": {"a": 0.5, "b": 0.5, "log_kN": 0.0, "log_kD": 0.0}},
                       str(tmp_path / "opt"))
  assert os.listdir(tmp_path) == []


def test_plots_land_in_a_gs_bucket(fake_gcs):  # noqa: F811
  paths = plots.plot_law("gs://bkt/plots/law", E=E, A=A, B=B, alpha=ALPHA, beta=BETA)
  assert paths == ["gs://bkt/plots/law.png", "gs://bkt/plots/law.svg"]
  png = fake_gcs.local(paths[0]).read_bytes()
  svg = fake_gcs.local(paths[1]).read_bytes()
  assert png.startswith(PNG_SIGNATURE) and len(png) > 1000
  assert b"<svg" in svg[:2000] and svg.rstrip().endswith(b"</svg>")
  assert fake_gcs.stray_local_files() == []
