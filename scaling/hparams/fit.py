"""`chinchax fit-hparams` as a library call: runs in, the hparams.json document out.

    fit(paths or runs, lr_vars=("N", "D"), batch_vars=("D",), bootstrap=1000, ci=0.9) -> dict

The steps: the runs grouped into (N, D) points (hparams_runs) → each point's optimum
(hparams_local) → the LR and batch laws with bootstrap intervals (hparams_law) → the document
(hparams_file). No jax here.
"""

import datetime
import os

import numpy as np

from chinchax import versions
from chinchax.errors import UserError
from chinchax.scaling.hparams import file as hparams_file
from chinchax.scaling.hparams import law as hparams_law
from chinchax.scaling.hparams import local as hparams_local
from chinchax.scaling.hparams import runs as hparams_runs
from chinchax.scaling.numerics import intervals


def _axis(a: hparams_local.Axis) -> dict:
  return {"opt": a.opt, "within_tol": list(a.within_tol) if a.within_tol else None,
          "flags": list(a.flags)}


def _conventions(meta: dict) -> dict:
  one = lambda k: (meta.get(k) or [None])[0] if len(meta.get(k) or []) <= 1 else meta[k]
  return {"lr": "peak learning rate (after warmup)", "schedule": one("schedule"),
          "optimizer": one("optimizer"), "batch": "tokens per optimizer step",
          "seq_len": one("seq_len"), "N": "total parameters", "D": "training tokens",
          "C": "6ND", "loss": "held-out loss of the run's end"}


def fit(inputs, *, lr_vars=("N", "D"), batch_vars=("D",), bootstrap: int = 1000,
        ci: float = 0.9, seed: int = 0, tol: float = hparams_local.TOL,
        lr_window: int = hparams_local.LR_WINDOW,
        batch_window: int = hparams_local.BATCH_WINDOW,
        explode: float = hparams_local.EXPLODE, meta: dict | None = None) -> dict:
  """`inputs`: paths (CSV, runs.jsonl, workdir) or a list of `hparams_runs.Run`."""
  ci = intervals.check_level(ci, "ci")
  if isinstance(inputs, (list, tuple)) and inputs and isinstance(inputs[0], hparams_runs.Run):
    runs, meta, names = list(inputs), meta or {}, []
  else:
    runs, meta = hparams_runs.read(inputs)
    names = [os.fspath(p) for p in inputs]
  points = hparams_runs.points(runs)
  fits = [hparams_local.optimum(p, lr_window=lr_window, batch_window=batch_window,
                                explode=explode, tol=tol) for p in points]
  rng = np.random.default_rng(seed)
  lr = hparams_law.fit(fits, "lr", tuple(lr_vars), bootstrap=bootstrap, ci=ci, rng=rng)
  has_batch = any(f.batch.opt is not None or "single" not in f.batch.flags for f in fits)
  warnings = list(lr["warnings"])
  batch = None
  if not has_batch:
    warnings.append("one batch size near every point's minimum: no batch law")
  else:
    try:  # the LR law stands without a batch law
      batch = hparams_law.fit(fits, "batch", tuple(batch_vars), bootstrap=bootstrap, ci=ci,
                              rng=rng)
      warnings += batch["warnings"]
    except UserError as e:
      warnings.append(f"no batch law: {e}")
  not_trained = meta.get("not_trained") or []
  if not_trained:
    warnings.append(f"{len(not_trained)} run{'s' if len(not_trained) > 1 else ''} failed "
                    "before training (a record without hparams) and "
                    f"{'were' if len(not_trained) > 1 else 'was'} left out: "
                    + ", ".join(not_trained[:5]) + (", ..." if len(not_trained) > 5 else ""))
  diverged = sum(f.diverged for f in fits)
  if diverged:
    warnings.append(f"{diverged} of {len(runs)} runs diverged (nan, failed or loss > "
                    f"{1 + explode:g}x the point's best) and were left out of the fits")
  doc = {
      "schema": hparams_file.SCHEMA, "lr": lr, "batch": batch,
      "points": [{"N": f.N, "D": f.D, "C": 6 * f.N * f.D, "runs": f.runs,
                  "diverged": f.diverged, "loss_opt": f.loss_opt, "lr": _axis(f.lr),
                  "batch": _axis(f.batch)} for f in fits],
      "conventions": _conventions(meta),
      "settings": {"ci": ci, "bootstrap": bootstrap, "seed": seed, "tol": tol,
                   "lr_window": lr_window, "batch_window": batch_window, "explode": explode,
                   "flat_rtol": hparams_local.FLAT_RTOL},
      "provenance": {"chinchax": versions.chinchax(), "inputs": names,
                     "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                         timespec="seconds")},
      "warnings": warnings,
  }
  return hparams_file.validate(doc)


def fit_and_write(paths, out: str, *, plots: str | None = None, **kw) -> tuple[dict, list[str]]:
  """`fit(paths, **kw)` written to `out` (and its plots to the folder `plots`); returns (the
  document, the files written)."""
  runs, meta = hparams_runs.read(paths)  # read once, for the fit and its plots
  doc = fit(runs, meta=meta, **kw)
  doc["provenance"]["inputs"] = [os.fspath(p) for p in paths]
  hparams_file.save(out, doc)
  written = [out]
  if plots:
    from chinchax.scaling.hparams import plots as hparams_plots  # pylint: disable=g-import-not-at-top
    written += hparams_plots.write_plots(hparams_runs.points(runs), doc, plots)
  return doc, written
