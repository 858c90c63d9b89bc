"""A sweep's hyperparameters: measured on an LR x batch grid, then used by later recipes.

Measured. With `hparams.lr_factors` (and optionally `hparams.batch_factors`) set, each cell of
the grid becomes one cell per (LR factor, batch factor) (`expand`): peak LR = factor · the
recipe's LR of that cell, batch = factor · the recipe's batch (whole multiples of
`recipe.batch_multiple`, the steps recomputed so that D stays as close as the new batch
allows). The recipe's guess is the centre of the grid, so `recipe.lr_rule='law:PATH'` aims a
second grid with a first one's law. Names carry the LR and batch (`N1.01e4-T20-lr1.7e-2-B8`),
and a fixed-N series carries them too, so that with `fixed_n.schedule='wsd'` each (size, LR,
batch) is one WSD run whose cooldown branches are the grid's D values. The sweep ends with
what `chinchax fit-hparams WORKDIR --out=WORKDIR/hparams.json --plots=WORKDIR/plots` does
(`fit_workdir`) and report.md with its table, laws and plots (`write_report`), in place of
the IsoFLOP fit.

Used. A recipe's LR and batch come from a fitted hparams.json with `recipe.lr_rule =
'law:PATH'`, `recipe.batch_rule = 'law:PATH'` (sweeps/recipe.py): the law gives each cell's
peak LR η*(N, D) (or of C = 6ND, or N) and its batch B*(D) in tokens. A cell outside the
points the law was fitted over is an extrapolation: the dry run says so, cell by cell
(`outside`). No jax here."""

import dataclasses
import functools
import os
import sys

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.hparams import file as hparams_file
from chinchax.scaling.hparams import fit as hparams_fit
from chinchax.scaling.hparams import law as hparams_law
from chinchax.scaling.hparams import text as hparams_text
from chinchax.scaling.numerics import fmt
from chinchax.sweeps.configs import sweep as sweep_config


PREFIX = "law:"


def is_law(rule: str) -> bool:
  return isinstance(rule, str) and rule.startswith(PREFIX)


def path_of(rule: str) -> str:
  return rule[len(PREFIX):]


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> dict:
  del mtime  # part of the cache key only: a refitted file is read again
  return hparams_file.load(path)


def law(rule: str, which: str) -> dict:
  """The `which` ('lr' or 'batch') law of the rule's hparams.json (UserError if none)."""
  from chinchax.errors import UserError  # pylint: disable=g-import-not-at-top
  path = path_of(rule)
  try:
    mtime = os.path.getmtime(path)
  except OSError:
    mtime = 0.0  # not a local file: hparams_file.load says what is wrong
  doc = _load(path, mtime)
  if doc[which] is None:
    raise UserError(f"{path} holds no {which} law (its grid had one batch size per point); "
                    f"use another recipe.{which}_rule")
  return doc[which]


def values(N: float, D: float) -> dict:
  return {"N": N, "D": D, "C": 6.0 * N * D}


def value(rule: str, which: str, N: float, D: float) -> float:
  return hparams_law.predict(law(rule, which), values(N, D))[0]


def outside(rule: str, which: str, N: float, D: float) -> list[str]:
  """One phrase per variable of the law whose value lies outside the law's fitted range."""
  lw, v = law(rule, which), values(N, D)
  return [f"{k}={fmt.num(v[k])} outside the {which} law's fitted {fmt.num(lo)}-{fmt.num(hi)}"
          for k, (lo, hi) in lw["range"].items() if not lo <= v[k] <= hi]


def active(cfg) -> bool:
  """Whether the sweep config asks for an LR x batch grid."""
  return bool(cfg.hparams.lr_factors) or bool(cfg.hparams.batch_factors)


def factors(cfg) -> tuple[list[float], list[float]]:
  lr = sweep_config.numbers(list(cfg.hparams.lr_factors), "hparams.lr_factors") or [1.0]
  batch = sweep_config.numbers(list(cfg.hparams.batch_factors), "hparams.batch_factors") or [1.0]
  for name, xs in (("lr_factors", lr), ("batch_factors", batch)):
    if len(set(xs)) != len(xs):
      raise UserError(f"hparams.{name} has repeats: {xs}; list each factor once")
  return sorted(lr), sorted(batch)


def _num(x: float) -> str:
  mant, _, exp = f"{x:.3g}".partition("e")
  return mant + (f"e{int(exp)}" if exp else "")


def expand(cells, cfg, rec) -> tuple[list, list[str]]:
  """(cells, refusals): every cell at every (LR factor, batch factor) of `cfg.hparams`."""
  if not active(cfg):
    return list(cells), []
  lr_f, batch_f = factors(cfg)
  k, out, refusals = rec.batch_multiple, [], []
  for cell in cells:
    seen = set()
    for g in batch_f:
      if cell.batch_size * g * cell.seq_len > cell.D:  # not one step (nor a batch to name)
        refusals.append(f"{cell.name}: refused: batch factor {g:g} gives a batch of "
                        f"{fmt.num(cell.batch_size * g * cell.seq_len)} tokens, more than the "
                        f"cell's D={fmt.num(cell.D)}; drop the batch factor")
        continue
      bs = max(k, k * round(cell.batch_size * g / k))
      if bs in seen:
        refusals.append(f"{cell.name}: refused: batch factor {g:g} rounds to {bs} sequences, "
                        "as another factor does; spread hparams.batch_factors")
        continue
      seen.add(bs)
      steps = round(cell.D / (bs * cell.seq_len))
      for f in lr_f:
        lr = cell.peak_lr * f
        tag = f"-lr{_num(lr)}-B{bs}"
        if steps < cfg.min_steps:
          refusals.append(f"{cell.name}{tag}: refused: {steps} steps < min_steps="
                          f"{cfg.min_steps} at batch {bs}x{cell.seq_len}; drop the batch "
                          "factor or raise D")
          continue
        D = float(steps * bs * cell.seq_len)
        scale = D / cell.D
        out.append(dataclasses.replace(
            cell, name=cell.name + tag, series=cell.series and cell.series + tag, D=D,
            tokens_per_param=D / cell.N, steps=steps, batch_size=bs, peak_lr=lr,
            warmup_steps=rec.warmup_steps(steps), flops_6ND=cell.flops_6ND * scale,
            flops_chinchilla=cell.flops_chinchilla * scale))
  return out, refusals


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
    from chinchax.scaling.hparams import file as hparams_file  # pylint: disable=g-import-not-at-top
    doc = hparams_file.load(os.path.join(workdir, "hparams.json"))
    out += ["```", hparams_text.summary(doc), "```", ""]
  plots = [s for s in PLOTS if atomic.exists(os.path.join(workdir, "plots", f"{s}.png"))]
  out += [f"![{s}](plots/{s}.png)" for s in plots]
  path = os.path.join(workdir, "report.md")
  atomic.write_text(path, "\n".join(out) + "\n")
  return path
