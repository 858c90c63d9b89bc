"""The end of a sweep that measures its hyperparameters (sweeps/hparams_grid.py): what
`chinchax fit-hparams WORKDIR --out=WORKDIR/hparams.json --plots=WORKDIR/plots` does, and
report.md with its table, laws and plots, in place of the IsoFLOP fit."""

import os
import sys

from chinchax import atomic
from chinchax.scaling import hparams_fit, hparams_text

PLOTS = ("hparams_lr", "hparams_lr_law", "hparams_batch_law")


def fit_workdir(workdir: str, bootstrap: int) -> str:
  """Fits the runs in `workdir`; writes hparams.json and plots/, prints the table and laws."""
  out = os.path.join(workdir, "hparams.json")
  doc, written = hparams_fit.fit_and_write([workdir], out, bootstrap=bootstrap,
                                           plots=os.path.join(workdir, "plots"))
  print(hparams_text.summary(doc))
  print("wrote " + ", ".join(written))
  sys.stdout.flush()
  return out


def write_report(workdir: str, fit_error: str | None = None) -> str:
  name = os.path.basename(os.fspath(workdir).rstrip("/"))
  out = [f"# Hyperparameter sweep report: {name}", ""]
  if fit_error:
    out += [f"The fit failed: {fit_error}", ""]
  else:
    from chinchax.scaling import hparams_file  # pylint: disable=g-import-not-at-top
    doc = hparams_file.load(os.path.join(workdir, "hparams.json"))
    out += ["```", hparams_text.summary(doc), "```", ""]
  plots = [s for s in PLOTS if atomic.exists(os.path.join(workdir, "plots", f"{s}.png"))]
  out += [f"![{s}](plots/{s}.png)" for s in plots]
  path = os.path.join(workdir, "report.md")
  atomic.write_text(path, "\n".join(out) + "\n")
  return path
