"""An adaptive study (`adaptive.round_cells` > 0): rounds of `chinchax next` (scaling/select)
over the pool of the config's grid (sweeps/spec.py `pool_cells`: every budget at every size of
its shape family), each round's cells trained and fitted by the ordinary sweep, until the
decision stops (the answer's interval at `adaptive.width`, or no cell fits in
`adaptive.max_flops`).

Round 0 is the space-filling first design of `adaptive.first_cells` cells; each later round
adds `adaptive.round_cells`. A round's sweep is the config with the cells chosen so far as its
grid (its budgets, and each budget's sizes), so it trains only what is new, fits every run and
writes report.md; the config's grid keys change from round to round, which the sweep says
("extending the study"). Each decision is a line of WORKDIR/adaptive.jsonl (`ROUNDS`): its
cells, why, whether it stops, the answer's interval now (the width the previous round
achieved) and the width expected after it (none while the fit is poorly determined: `phase`
"spread", scaling/select/spread.py), and the FLOPs spent: those of the chosen cells the
sweep ran (a cell it refused before training, its D past the data's unique tokens, costs
nothing and is not offered again). A rerun after a kill replays
the recorded decisions (the same cells, trained where not done) before deciding anew, so a
resumed round makes the same decision; a decision's fit is seeded, so one made again from the
same runs is the same too. report.md ends with the rounds' table: the answer's interval
against FLOPs spent.

The pool itself, every cell of the config's grid (not only the budgets chosen so far, which are
all a round's sweep.json holds), is WORKDIR/adaptive_pool.csv (`POOL`: columns N, D, C,
budget), written at each start: `chinchax next WORKDIR` reads it, and so can `--candidates`."""

import json
import math
import os

import ml_collections
import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import records
from chinchax.scaling.runs import table as runs_lib
from chinchax.scaling.select import decide
from chinchax.scaling.select import pool as pool_lib

ROUNDS = "adaptive.jsonl"
POOL = "adaptive_pool.csv"


def active(config: ml_collections.ConfigDict) -> bool:
  return bool(config.adaptive.round_cells)


def pool_of(cells) -> pool_lib.Pool:
  return pool_lib.make_pool(
      [c.N for c in cells], [c.D for c in cells], budget=[c.budget for c in cells],
      cost=[c.flops_6ND if c.flops == "6ND" else c.flops_chinchilla for c in cells],
      source="the adaptive pool")


def write_pool(workdir: str, pool: pool_lib.Pool) -> None:
  rows = zip(pool.N, pool.D, pool.cost, pool_lib.budgets_of(pool))
  atomic.makedirs(workdir)
  atomic.write_text(os.path.join(workdir, POOL), "N,D,C,budget\n" + "".join(
      f"{float(n)!r},{float(d)!r},{float(c)!r},{float(b)!r}\n" for n, d, c, b in rows))


def round_config(config: ml_collections.ConfigDict, cells) -> ml_collections.ConfigDict:
  """The config whose grid is `cells` (each a (N, budget)): their budgets, each with its sizes."""
  c = ml_collections.ConfigDict(config.to_dict())
  budgets = sorted({b for _, b in cells})
  c.budgets = tuple(budgets)
  c.sizes = tuple(tuple(sorted(n for n, b in cells if b == budget)) for budget in budgets)
  return c


def recorded(workdir: str) -> list[dict]:
  text = atomic.read_text(os.path.join(workdir, ROUNDS)) or ""
  out = []
  for line in text.splitlines():
    try:
      out.append(json.loads(line))
    except ValueError:
      break  # a torn last line: that round is decided again
  return out


def _runs(workdir: str):
  try:
    return runs_lib.load_runs([workdir]) if atomic.exists(
        os.path.join(workdir, "runs.jsonl")) else None
  except UserError:  # no usable run yet: a first design
    return None


def run(config: ml_collections.ConfigDict, workdir: str, pool_cells, train_round, say):
  """Rounds until the decision stops; `train_round(config)` is the ordinary sweep of one
  round's grid (its Result). Returns the last round's Result (None: nothing was trained)."""
  a = config.adaptive
  pool = pool_of(pool_cells)
  write_pool(workdir, pool)
  path = os.path.join(workdir, ROUNDS)
  rounds = recorded(workdir)
  chosen: list[tuple[float, float]] = []
  result = None
  for i in range(10_000):
    if i < len(rounds):
      r = rounds[i]
    else:
      runs = _runs(workdir)
      spent = _spent(pool, _trained(workdir, chosen))
      left = a.max_flops - spent if a.max_flops else None
      if left is not None and left <= 0:
        left = 1e-300
      d = decide.choose(runs, pool, a.first_cells if not chosen else a.round_cells,
                        flops_left=left, target=a.target, width=a.width or None,
                        tried=_tried(pool, chosen))
      e = d.expected
      r = {"round": i, "cells": [[c.N, c.budget] for c in d.cells], "why": d.why,
           "stop": d.stop, "interval": e.get("interval"), "width": e.get("width"),
           "width_after": e.get("width_after"), "phase": e.get("phase"), "flops_spent": spent,
           "flops_round": e.get("flops", 0.0), "answer": e["answer"],
           "cell_why": [c.why for c in d.cells]}
      atomic.makedirs(workdir)
      atomic.write_text(path, "".join(json.dumps(x) + "\n" for x in rounds + [r]))
      rounds.append(r)
    say(f"adaptive round {r['round']}: {r['why']}")
    if r["stop"] or not r["cells"]:
      break
    chosen += [(float(n), float(b)) for n, b in r["cells"]]
    if i + 1 < len(rounds):
      continue  # replayed: trained with the last recorded round
    result = train_round(round_config(config, chosen))
    if result.status != "done":
      return result
    _report(workdir, rounds)
  if result is None and chosen:
    result = train_round(round_config(config, chosen))
  _report(workdir, rounds)
  return result


def _trained(workdir: str, chosen) -> list[tuple[float, float]]:
  """The chosen cells a round's sweep ran (a line in runs.jsonl, done or failed): only they
  cost FLOPs. A cell the sweep refused before training (its D past the data's unique tokens)
  cost nothing; it stays chosen, so it is not offered again."""
  path = os.path.join(workdir, "runs.jsonl")
  ran = [(float(r["N_total"]), float(r["budget"])) for _, r in records.read_runs(path)
         if r.get("N_total") and r.get("budget")] if atomic.exists(path) else []
  return [(n, b) for n, b in chosen
          if any(math.isclose(n, m, rel_tol=1e-6) and math.isclose(b, c, rel_tol=1e-6)
                 for m, c in ran)]


def _spent(pool: pool_lib.Pool, chosen) -> float:
  return float(sum(pool.cost[np.argmin(np.abs(np.log(pool.N / n)) + np.abs(np.log(
      pool_lib.budgets_of(pool) / b)))] for n, b in chosen))


def _tried(pool: pool_lib.Pool, chosen) -> np.ndarray:
  """The pool's cells chosen before (a diverged or failed one left no run: not again)."""
  mask = np.zeros(len(pool), bool)
  budgets = pool_lib.budgets_of(pool)
  for n, b in chosen:
    mask[np.argmin(np.abs(np.log(pool.N / n)) + np.abs(np.log(budgets / b)))] = True
  return mask


def table(rounds: list[dict]) -> str:
  """report.md's section: each round's answer interval against the FLOPs spent before it."""
  lines = ["", "## Adaptive rounds", "",
           f"The answer ({rounds[0]['answer'] if rounds else 'a'}), its 90% interval when "
           "each round was decided, against the FLOPs spent before it (sweeps/adaptive/"
           "rounds.py; every decision is a line of adaptive.jsonl).", "",
           "| round | FLOPs spent | interval | width | cells | expected width after |",
           "| --- | --- | --- | --- | --- | --- |"]
  for r in rounds:
    lines.append(f"| {r['round']} | {fmt.num(r['flops_spent'])} | "
                 f"{fmt.interval(r['interval']) or '-'} | {fmt.num(r['width'])} | "
                 f"{len(r['cells'])}{' (stop)' if r['stop'] else ''} | "
                 f"{_after(r)} |")
  return "\n".join(lines) + "\n"


def _after(r: dict) -> str:
  if r.get("phase") == "spread":  # scaling/select/spread.py: the update is not trusted yet
    return "none promised: poorly determined, the cells spread the design"
  return fmt.num(r["width_after"])


def _report(workdir: str, rounds: list[dict]) -> None:
  path = os.path.join(workdir, "report.md")
  text = atomic.read_text(path)
  if text is None:
    return
  text = text.split("\n## Adaptive rounds\n")[0].rstrip("\n") + "\n"
  atomic.write_text(path, text + table(rounds))
