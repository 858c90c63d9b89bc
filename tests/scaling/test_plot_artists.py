"""What the figures draw, not only that files exist: the bootstrap band's polygon, the fitted
range and the shaded extrapolation, every budget labelled inside the frame at round contour
levels, and residuals equal to loss minus the law at each run."""

import numpy as np
import pytest
from matplotlib.collections import PolyCollection

from chinchax.scaling import pipeline as fit_pipeline, figures as fit_plots
from chinchax.scaling.plots import law as plots
from chinchax.scaling.plots import residuals as residual_plots
from chinchax.scaling.runs.table import make_runs

E, A, B, ALPHA, BETA = 1.69, 406.4, 410.7, 0.34, 0.28


def _frame(ax):
  return ax.get_xlim(), ax.get_ylim()


def _inside(ax, x, y) -> bool:
  (x0, x1), (y0, y1) = _frame(ax)
  return x0 < x < x1 and y0 < y < y1


def test_optimal_draws_the_band_the_fitted_range_and_the_extrapolation():
  rng = np.random.default_rng(0)
  a = 0.5 + 0.02 * rng.standard_normal(200)
  log_k = -1.0 + 0.3 * rng.standard_normal(200)
  a[:5] = np.nan  # refits that gave no law: left out, not a NaN band
  samples = {"Approach 2": {"a": a, "b": 1 - a, "log_kN": log_k, "log_kD": -log_k}}
  line = {"a": 0.5, "b": 0.5, "log_kN": -1.0, "log_kD": 1.0}
  fig = plots.optimal_figure({"Approach 2": line}, samples, level=0.8, C_range=(1e15, 1e24),
                             fitted_C=(1e17, 1e19))
  ax = fig.axes[0]
  bands = [c for c in ax.collections if isinstance(c, PolyCollection)
           and "bootstrap band" in c.get_label()]
  assert len(bands) == 1
  verts = bands[0].get_paths()[0].vertices
  assert np.isfinite(verts).all() and len(verts) > 100
  # The band at C = 1e21 is the 10th-90th percentile of the sampled lines there.
  ok = np.isfinite(a)
  want = np.exp(np.percentile(log_k[ok] + a[ok] * np.log(1e21), [10, 90]))
  at = verts[np.argmin(np.abs(np.log(verts[:, 0] / 1e21)))]
  assert min(abs(np.log(at[1] / w)) for w in want) < 0.1
  assert "80% bootstrap band" in bands[0].get_label()
  # The fitted range: two dotted lines at its ends; the extrapolation shaded beyond it.
  vlines = sorted(l.get_xdata()[0] for l in ax.lines if l.get_linestyle() == ":")
  assert vlines == [1e17, 1e19]
  shaded = [p for p in ax.patches + ax.collections if p.get_label() == "extrapolation"]
  assert len(shaded) == 1
  span = shaded[0]  # a Rectangle in data x (matplotlib >= 3.9), a Polygon before
  xs = ([span.get_x(), span.get_x() + span.get_width()] if hasattr(span, "get_width")
        else np.asarray(span.get_xy())[:, 0])
  assert min(xs) == pytest.approx(1e19) and max(xs) == pytest.approx(1e24)
  assert ax.get_legend() is None  # one legend for the figure, under the panels
  legend = [t.get_text() for t in fig.legends[0].get_texts()]
  assert any("fitted C" in t for t in legend) and "extrapolation" in legend
  assert any("a = 0.500" in t for t in legend) and any("b = 0.500" in t for t in legend)
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  renderer = FigureCanvasAgg(fig).get_renderer()
  box, panel = fig.legends[0].get_window_extent(renderer), ax.get_window_extent(renderer)
  assert box.y1 <= panel.y0  # below the panels, covering none of them


def test_every_budget_is_labelled_inside_the_frame_at_round_levels():
  N = np.geomspace(1e7, 1e9, 12)
  D = np.geomspace(1e10, 1e9, 12)
  budgets = [1e17, 1e18, 1e19, 3e19]
  fig = plots.law_figure(E=E, A=A, B=B, alpha=ALPHA, beta=BETA, N=N, D=D, budgets=budgets)
  ax = fig.axes[0]
  labels = {t.get_text(): t.get_position() for t in ax.texts}
  written = {1e17: "C=1e17", 1e18: "C=1e18", 1e19: "C=1e19", 3e19: "C=3e19"}
  assert set(labels) == set(written.values())
  for C in budgets:
    x, y = labels[written[C]]
    assert _inside(ax, x, y)
    assert y == pytest.approx(C / (6 * x))  # on its own line
    # away from the frontier N*(C): at least a quarter of the line's span in the frame
    G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))
    N_star = G * (C / 6) ** (BETA / (ALPHA + BETA))
    lo = max(np.log(ax.get_xlim()[0]), np.log(C / (6 * ax.get_ylim()[1])))
    hi = min(np.log(ax.get_xlim()[1]), np.log(C / (6 * ax.get_ylim()[0])))
    assert abs(np.log(x / N_star)) >= (hi - lo) / 4 - 1e-9, C
  colorbar = fig.axes[1]
  ticks = [t for t in colorbar.get_yticks() if np.isfinite(t)]
  assert ticks and all(abs(t * 100 - round(t * 100)) < 1e-6 for t in ticks)  # round values


def test_a_budget_line_outside_the_frame_gets_no_label():
  fig = plots.law_figure(E=E, A=A, B=B, alpha=ALPHA, beta=BETA, N_range=(1e7, 1e8),
                         D_range=(1e9, 1e10), budgets=[1e17, 1e30])
  assert [t.get_text() for t in fig.axes[0].texts] == ["C=1e17"]


def test_residuals_by_budget_and_by_N():
  rng = np.random.default_rng(1)
  budgets = np.repeat([1e18, 1e19, 1e20], 5)
  N = np.concatenate([np.geomspace(3e7, 1e9, 5) * k for k in (1, 3, 9)])
  D = budgets / (6 * N)
  noise = 0.01 * rng.standard_normal(len(N))
  loss = E + A / N**ALPHA + B / D**BETA + noise
  runs = make_runs(N, D, loss, budget=budgets)
  r = fit_plots.residuals(runs, fit_plots.parametric(E, A, B, ALPHA, BETA))
  np.testing.assert_allclose(r, noise, atol=1e-12)
  fig = residual_plots.residual_figure(runs, r, "t")
  by_C, by_N = fig.axes
  xy = np.concatenate([c.get_offsets() for c in by_C.collections])
  np.testing.assert_allclose(np.sort(xy[:, 1]), np.sort(noise), atol=1e-12)
  assert sorted(set(np.round(xy[:, 0] / 1e18, 6))) == [1.0, 10.0, 100.0]
  lines = [l for l in by_N.lines if l.get_label().startswith("C = ")]
  assert len(lines) == 3
  np.testing.assert_allclose(np.sort(np.concatenate([l.get_ydata() for l in lines])),
                             np.sort(noise), atol=1e-12)


def test_a_fit_writes_the_residual_plot(tmp_path):
  budgets = np.repeat([1e17, 1e18, 1e19], 5)
  a = BETA / (ALPHA + BETA)
  G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))
  N = np.concatenate([G * (C / 6) ** a * np.geomspace(0.3, 3, 5) for C in (1e17, 1e18, 1e19)])
  D = budgets / (6 * N)
  loss = E + A / N**ALPHA + B / D**BETA
  fitted = fit_pipeline.fit_runs(make_runs(N, D, loss, budget=budgets),
                                 fit_pipeline.Options(bootstrap=20, approaches=("2",),
                                                      approach2_method="vp"))
  paths = fit_plots.write_plots(fitted, str(tmp_path), in_process=True)
  assert str(tmp_path / "residuals.png") in paths and str(tmp_path / "residuals.svg") in paths
  r, title = fit_plots._residuals(fitted)
  assert "Approach 2" in title and np.nanmax(np.abs(r)) < 1e-3  # exact data: profiles fit it
