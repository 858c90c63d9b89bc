"""The figures of a fit (scaling.plots): IsoFLOP profiles, N*(C) and D*(C) of every approach
with their bootstrap bands, and the loss contours of a parametric law."""

import os

from chinchax.scaling import plots
from chinchax.scaling import runs as runs_lib
from chinchax.scaling.fit_pipeline import Fitted

LABELS = {"1": "Approach 1", "2": "Approach 2", "3": "Approach 3"}


def write_plots(fitted: Fitted, folder: str) -> list[str]:
  """PNG and SVG files in `folder`; returns their paths."""
  runs, doc, written = fitted.runs, fitted.doc, []
  if "2" in fitted.fits:
    written += plots.plot_isoflops(runs, fitted.fits["2"], os.path.join(folder, "isoflops"))
  lines = {LABELS[k]: v for k, v in doc["approaches"].items()}
  bands = {LABELS[k]: v for k, v in fitted.draws.items()}
  C_range = (float(runs.C.min()) / 10, float(runs.C.max()) * 1e4)
  written += plots.plot_optimal(lines, os.path.join(folder, "optimal"), samples=bands,
                                level=fitted.level, C_range=C_range)
  law = doc["law"]
  if "E" in law:
    budgets = sorted({float(runs.C[g].mean()) for g in runs_lib.budget_groups(runs)})
    written += plots.plot_law(os.path.join(folder, "law"), E=law["E"], A=law["A"], B=law["B"],
                              alpha=law["alpha"], beta=law["beta"], N=runs.N, D=runs.D,
                              budgets=budgets)
  return written
