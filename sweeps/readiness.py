"""`chinchax sweep --dry-run`: the grid without data, and with `--compile` every cell compiled
for its TPU slice before any chip is rented.

    chinchax sweep --config=PATH --dry-run [--compile[=TARGET]] [--json] [--headroom=0.1]

The dry run reads no dataset: the grid comes from the config alone (so D is not checked
against the corpus's unique tokens; the sweep itself does that). `--compile` compiles every
cell's train and eval steps ahead of time (`sweeps.aot`) for TARGET, default the config's
`target` key: a TPU slice (`v5p:2x2x4`, `v5e:4x4,slices=2`, `v6e-8`; needs libtpu, `pip
install 'chinchax[tpu]'`) or `local`, this machine's own devices (a GPU node checks itself).
Cells with the same shape, batch and setting compile once; compilation runs on a thread per
CPU core. Per cell it prints HBM per chip, whether that fits the chip's usable HBM less
`--headroom` (default 10%, kept for the runtime, checkpoint copies and fragmentation), the
compiled FLOPs per step over the analytic Chinchilla count of `scaling.conventions` (≈1 with
remat none: the embedding is a gather here and a matmul there; remat adds its recompute) and
the compile time.

A cell that does not fit is refused (exit status 2), with the first of these settings that makes
it fit, tried in this order: FSDP over the whole slice, remat minimal, both, remat full, both,
then gradient accumulation 2, 4, 8 on top of FSDP and full remat. `--json` prints one object
instead: {"target", "chips", "hbm_capacity_bytes", "hbm_budget_bytes", "cells": [...],
"refused": [...]}, each cell with at least N, hbm_bytes_per_chip and fits.
"""

import concurrent.futures
import dataclasses
import json
import os
import sys
import time

import ml_collections

from chinchax.models import mesh as mesh_lib
from chinchax.models.config import ModelConfig
from chinchax.scaling import conventions
from chinchax.scaling.errors import UserError
from chinchax.sweeps import aot, estimate, grid, hardware, optimizer, table
from chinchax.sweeps import spec as spec_lib

HEADROOM = 0.10
_FLAGS = ("--compile", "--json", "--headroom")


@dataclasses.dataclass(frozen=True)
class Options:
  compile: str | None = None   # "" = the config's target
  json: bool = False
  headroom: float = HEADROOM


def is_dry_run(argv: list[str]) -> bool:
  return "--dry-run" in argv or "--dry_run" in argv


def split_flags(argv: list[str]) -> tuple[list[str], Options]:
  rest, kw = [], {}
  for arg in argv:
    name, eq, value = arg.partition("=")
    if name == "--compile":
      kw["compile"] = value
    elif arg == "--json":
      kw["json"] = True
    elif name == "--headroom":
      try:
        kw["headroom"] = float(value)
      except ValueError:
        kw["headroom"] = -1.0
      if not 0 <= kw["headroom"] < 1:
        raise UserError(f"--headroom={value!r}: give the fraction of HBM to keep free, "
                        "from 0 to below 1 (default 0.1)")
    else:
      rest.append(arg)
  return rest, Options(**kw)


def setup_for(cell: grid.Cell, c: ml_collections.ConfigDict) -> aot.Setup:
  """What a cell's run compiles: its shape and batch, the config's numerics, mesh, sharding."""
  t = cell.train_config(c)
  m = t.model
  model = ModelConfig(cell.shape, compute_dtype=m.compute_dtype, param_dtype=m.param_dtype,
                      remat=m.remat, z_loss=m.z_loss)
  return aot.Setup(model, optimizer.OptimizerConfig(**t.optimizer.to_dict()), cell.steps,
                   (t.mesh.data, t.mesh.fsdp, t.mesh.tensor), t.sharding, cell.batch_size,
                   t.grad_accum)


def remedies(s: aot.Setup, n_devices: int, slices: int = 1) -> list[tuple[tuple[str, ...],
                                                                         aot.Setup]]:
  """(config overrides, setup) to try for a cell that does not fit, cheapest first."""
  data, _, tensor = mesh_lib.resolve_shape(s.mesh, n_devices)
  fsdp_done = s.mode == "fsdp" and data == slices
  fsdp = (((f"--config.train.mesh.data={slices}", "--config.train.mesh.fsdp=-1")
           + (("--config.train.sharding=fsdp",) if s.mode != "fsdp" else ())),
          dict(mesh=(slices, -1, tensor), mode="fsdp"))
  order = ["none", "minimal", "full"]
  remats = [r for r in order[order.index(s.model.remat) + 1:]]
  steps: list[list] = [] if fsdp_done else [[fsdp]]
  for r in remats:
    change = ((f"--config.train.model.remat={r}",),
              dict(model=dataclasses.replace(s.model, remat=r)))
    steps.append([change])
    if not fsdp_done:
      steps.append([fsdp, change])
  strongest = steps[-1] if steps else []
  for k in (2, 4, 8):
    steps.append(strongest + [((f"--config.train.grad_accum={s.grad_accum * k}",),
                               dict(grad_accum=s.grad_accum * k))])
  out = []
  for parts in steps:
    flags, kw = (), {}
    for f, changes in parts:
      flags, kw = flags + f, {**kw, **changes}
    out.append((flags, dataclasses.replace(s, **kw)))
  return out


@dataclasses.dataclass(frozen=True)
class Row:
  cell: grid.Cell
  setup: aot.Setup
  train: aot.Program
  eval: aot.Program | None
  budget: int | None                     # HBM bytes per chip the program may use
  devices: int = 1
  remedy: tuple[str, ...] | None = None  # overrides that make it fit
  remedy_hbm: int | None = None

  @property
  def hbm(self) -> int:
    return max(self.train.hbm_bytes, self.eval.hbm_bytes if self.eval else 0)

  @property
  def fits(self) -> bool | None:
    if self.train.error or (self.eval and self.eval.error):
      return False
    return None if self.budget is None else self.hbm <= self.budget

  @property
  def analytic_flops(self) -> float:
    tokens = self.cell.batch_size * self.cell.seq_len
    return conventions.flops_per_token(self.cell.shape, "chinchilla") * tokens


def _fits(programs, budget) -> bool:
  train, ev = programs
  if train.error or (ev and ev.error):
    return False
  return budget is None or max(train.hbm_bytes, ev.hbm_bytes if ev else 0) <= budget


def check(cells: list[grid.Cell], c: ml_collections.ConfigDict, devices: list,
          budget: int | None, slices: int = 1, say=lambda m: None,
          workers: int | None = None) -> list[Row]:
  """Compiles every cell (each distinct setup once, in parallel) and looks for remedies."""
  setups = [setup_for(cell, c) for cell in cells]
  key = lambda s: (s.model, s.mesh, s.mode, s.batch_size, s.grad_accum)
  first = {}
  for s in setups:
    first.setdefault(key(s), s)
  t0 = time.perf_counter()
  results: dict = {}
  with concurrent.futures.ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
    futures = {}
    for k, s in first.items():  # tracing stays on this thread; the compiler runs on the pool
      try:
        low = aot.lower(s, devices)
      except UserError as e:  # this cell cannot shard over the target: refused, not fatal
        results[k] = (aot.Program(0, error=str(e)), None)
        continue
      futures[pool.submit(aot.compile_lowered, low)] = k
    for i, f in enumerate(concurrent.futures.as_completed(futures)):
      results[futures[f]] = f.result()
      train = results[futures[f]][0]
      say(f"compiled {i + 1}/{len(futures)} ({time.perf_counter() - t0:.0f} s): "
          f"{train.hbm_bytes / hardware.GiB:.2f} GiB/chip"
          + (f", {train.error}" if train.error else ""))
  rows = []
  for cell, s in zip(cells, setups):
    train, ev = results[key(s)]
    row = Row(cell, s, train, ev, budget, len(devices))
    if row.fits is False and train.argument_bytes:
      row = _remedy(row, devices, slices, say)
    rows.append(row)
  return rows


def _remedy(row: Row, devices: list, slices: int, say) -> Row:
  for flags, s in remedies(row.setup, len(devices), slices):
    try:
      low = aot.lower(s, devices)
    except UserError:
      continue  # e.g. the batch does not split over the new mesh
    programs = aot.compile_lowered(low)
    say(f"{row.cell.name}: with {' '.join(flags)}: {programs[0].hbm_bytes / hardware.GiB:.2f} "
        "GiB/chip")
    if _fits(programs, row.budget):
      hbm = max(programs[0].hbm_bytes, programs[1].hbm_bytes if programs[1] else 0)
      return dataclasses.replace(row, remedy=flags, remedy_hbm=hbm)
  return row


# --------------------------------------------------------------------------- output


def _gib(b: int | None) -> str:
  return "–" if b is None else f"{b / hardware.GiB:.3g}"


def refusal(row: Row) -> str:
  why = row.train.error or (row.eval.error if row.eval else None)
  if why and not row.train.argument_bytes:  # never lowered: it does not shard over the target
    return f"{row.cell.name}: refused: {why}"
  need = (f"needs {'at least ' if why else ''}{_gib(row.hbm)} GiB of HBM per chip"
          + (f" > {_gib(row.budget)}" if row.budget else "") + (f" ({why})" if why else ""))
  fix = (f"fits with {' '.join(row.remedy)} ({_gib(row.remedy_hbm)} GiB/chip)" if row.remedy
         else "no remat, FSDP or grad_accum setting fits: use a larger slice or smaller batch")
  return f"{row.cell.name}: refused: {need}; {fix}"


def format_rows(rows: list[Row]) -> str:
  head = ["cell", "N", "batch", "mesh", "remat", "HBM/chip GiB", "args", "temps", "fits",
          "FLOPs compiled/chinchilla", "compile s"]
  body = []
  for r in rows:
    ratio = r.train.flops / r.analytic_flops if r.train.flops else None
    body.append([r.cell.name, f"{r.cell.N:,}", f"{r.cell.batch_size} x {r.cell.seq_len}",
                 "x".join(map(str, _resolved(r))), r.setup.model.remat, _gib(r.hbm),
                 _gib(r.train.argument_bytes), _gib(r.train.temp_bytes),
                 {True: "yes", False: "NO", None: "?"}[r.fits],
                 "–" if ratio is None else f"{ratio:.3f}",
                 f"{r.train.compile_s + (r.eval.compile_s if r.eval else 0):.0f}"])
  widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
  line = lambda x: "  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                             for i, (v, w) in enumerate(zip(x, widths))).rstrip()
  return "\n".join([line(head), line(["-" * w for w in widths])] + [line(x) for x in body])


def _resolved(r: Row) -> tuple[int, ...]:
  try:
    return mesh_lib.resolve_shape(r.setup.mesh, r.devices)
  except UserError:
    return r.setup.mesh


def _program_json(p: aot.Program | None) -> dict | None:
  if p is None:
    return None
  return {**dataclasses.asdict(p), "hbm_bytes": p.hbm_bytes}


def row_json(r: Row) -> dict:
  return {
      "name": r.cell.name, "N": r.cell.N, "D": r.cell.D, "budget": r.cell.budget,
      "batch_size": r.cell.batch_size, "seq_len": r.cell.seq_len,
      "mesh": list(_resolved(r)), "sharding": r.setup.mode, "remat": r.setup.model.remat,
      "grad_accum": r.setup.grad_accum, "hbm_bytes_per_chip": r.hbm, "fits": r.fits,
      "train": _program_json(r.train), "eval": _program_json(r.eval),
      "compiled_flops_per_step": r.train.flops,
      "analytic_flops_per_step": {
          "chinchilla": r.analytic_flops,
          "6ND": conventions.flops_per_token(r.cell.shape, "6ND") * r.cell.batch_size
                 * r.cell.seq_len},
      "flops_ratio": r.train.flops / r.analytic_flops if r.train.flops else None,
      "compile_s": r.train.compile_s + (r.eval.compile_s if r.eval else 0.0),
      "remedy": list(r.remedy) if r.remedy else None, "remedy_hbm_bytes": r.remedy_hbm,
  }


# --------------------------------------------------------------------------- the command


def dry_run(spec: spec_lib.Spec, opts: Options) -> int:
  """The whole dry run: the grid (no data), then with --compile the cells compiled."""
  c, cells, refusals = spec.config, list(spec.cells), list(spec.refusals)
  if opts.compile is None:
    if opts.json:
      print(json.dumps({"cells": [{"name": x.name, "N": x.N, "D": x.D,
                                   "hbm_bytes_per_chip": None, "fits": None} for x in cells],
                        "refused": refusals}, indent=1))
      return 0
    seconds, how = estimate.time_model(spec.executor)
    if c.get("target"):  # the slice the sweep is for, not this machine
      t = hardware.parse_target(c.target)
      rate = estimate.ASSUMED_MFU * t.chip.peak_flops * t.chips
      seconds = lambda cell: cell.flops_6ND / rate
      how = (f"time at {estimate.ASSUMED_MFU:.0%} of the {t.chips} x {t.chip.peak_flops:.3g} "
             f"FLOP/s peak of the target {t.name} (6ND FLOPs)")
    print(table.format_table(cells, refusals, seconds=seconds))
    print(how)
    print("unique tokens and the vocabulary are checked when the data is opened for training")
    return 0

  where = opts.compile or str(c.get("target", "") or "")
  if not where:
    raise UserError("--compile needs a target: set `target` in the config (e.g. "
                    "c.target = 'v5p:2x2x4') or write --compile=v5p:2x2x4 (or --compile=local)")
  target = None if where == "local" else hardware.parse_target(where)
  devices = aot.target_devices(target)
  if spec.executor.kind == "packed":
    devices = devices[:spec.executor.devices_per_cell]
  capacity = aot.hbm_capacity(devices)
  budget = None if capacity is None else int(capacity * (1 - opts.headroom))
  say = lambda m: print(m, file=sys.stderr, flush=True)
  name = target.name if target else f"{len(devices)} x {devices[0].device_kind} (local)"
  say(f"compiling {len(cells)} cells for {name} on {os.cpu_count()} CPU threads")
  t0 = time.perf_counter()
  rows = check(cells, c, devices, budget, target.slices if target else 1, say)
  elapsed = time.perf_counter() - t0
  refused = [refusal(r) for r in rows if r.fits is False]
  if opts.json:
    print(json.dumps({"target": name, "chips": len(devices), "hbm_capacity_bytes": capacity,
                      "headroom": opts.headroom, "hbm_budget_bytes": budget,
                      "compile_s": elapsed, "cells": [row_json(r) for r in rows],
                      "refused": refused, "grid_refused": refusals}, indent=1))
  else:
    print(format_rows(rows))
    room = (f"{_gib(capacity)} GiB HBM each, {opts.headroom:.0%} kept free: {_gib(budget)} GiB "
            "for the program" if capacity else "HBM capacity unknown: fits is not decided")
    verdict = (f"{sum(r.fits is True for r in rows)} fit, {len(refused)} refused" if capacity
               else f"{len(refused)} failed to compile")
    print(f"\n{len(rows)} cells compiled for {name} ({len(devices)} devices, {room}) in "
          f"{elapsed / 60:.1f} min; {verdict}")
    for line in refused + refusals:
      print(f"  {line}")
  return 2 if refused else 0
