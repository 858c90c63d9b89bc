"""`chinchax sweep --dry-run`: the grid without data, and with `--compile` every cell compiled
for its TPU slice or GPU node(s) before any accelerator is rented.

    chinchax sweep --config=PATH --dry-run [--compile[=TARGET]] [--json] [--headroom=0.1]

The dry run reads no dataset: the grid comes from the config alone (so D is not checked
against the corpus's unique tokens; the sweep itself does that). `--compile` compiles every
cell's train and eval steps ahead of time for TARGET, default the config's `target` key: a TPU
slice (`v5p:2x2x4`, `v5e:4x4,slices=2`, `v6e-8`; needs libtpu, `pip install
'chinchax[tpu]'`), GPU nodes (`h100:8`, `h200:8`, `h100:16` = 2 nodes of 8; needs jax's CUDA
plugin and ptxas, `pip install 'chinchax[gpu-compile]'`, no GPU) or `local`, this machine's own
devices; the checking is `sweeps.accel.readiness`. Per cell it prints HBM per chip, whether that
fits the chip's usable HBM less `--headroom` (default 10%, kept for the runtime, checkpoint
copies and fragmentation; on a GPU the usable memory is XLA's pool, the card's memory times
XLA_PYTHON_CLIENT_MEM_FRACTION, `sweeps.accel.gpu_budget`), the compiled FLOPs per step over the analytic Chinchilla count of
`scaling.runs.conventions` (≈1 with remat none: the embedding is a gather here and a matmul there;
remat adds its recompute) and the compile time. What each compile reports is kept
(`sweeps.accel.aot_cache`): a repeated dry run compiles only the cells that changed
(CHINCHAX_COMPILE_CACHE=off compiles everything).

A cell that does not fit is refused (exit status 2) with the setting that makes it fit, when
one does. `--json` prints one object instead: {"target", "chips", "hbm_capacity_bytes",
"hbm_budget_bytes", "cells": [...], "refused": [...]}, each cell with at least N,
hbm_bytes_per_chip and fits; for GPUs also "gpu": the card, nodes, the pool and which mesh
axes cross nodes.

Its time column (`time_model`) is a cell's estimated wall time on the devices it will get.
On CPU small models are overhead-bound, so a cell costs a fixed start (init and compile), a
fixed cost per step and its FLOPs (`sweeps/chips/cpu_time.py`, fitted to the smoke sweep's
cells on two CPU cores). With a known peak (sweeps/chips/hardware.py): ASSUMED_MFU of it."""

import dataclasses
import json
import sys
import time
from typing import Callable

import jax

from chinchax.errors import UserError
from chinchax.models import sharding as mesh_lib
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import conventions
from chinchax.sweeps import executors, fit_forecast, recipe as recipe_lib, spec as spec_lib, table
from chinchax.sweeps import wsd
from chinchax.sweeps.accel import aot, aot_cache, gpu_budget, readiness
from chinchax.sweeps.chips import cpu_time, hardware
from chinchax.sweeps.grid import Cell
from chinchax.sweeps.spec import Executor

ASSUMED_MFU = 0.3


def time_model(e: Executor) -> tuple[Callable[[Cell], float], str]:
  """(a cell's estimated seconds, how they are estimated)."""
  devices = (executors.cell_devices(e) or [jax.local_devices()[:1]])[0]
  peak = hardware.peak_flops(devices[0])
  if peak:
    rate = ASSUMED_MFU * peak * len(devices)
    return (lambda cell: cell.flops_6ND / rate), (
        f"time at {ASSUMED_MFU:.0%} of the {len(devices)} x {fmt.num(peak)} FLOP/s peak of "
        f"{devices[0].device_kind}")
  return (lambda cell: cpu_time.seconds(1, cell.steps, cell.flops_chinchilla)), (
      f"time on CPU: {cpu_time.CELL_S:.1f} s to start each cell, then {cpu_time.STEP_S * 1e3:.1f} "
      f"ms a step and {fmt.num(cpu_time.FLOPS_PER_S, 2)} FLOP/s (chinchilla), measured for small "
      "models on 2 cores, warm compile cache")


def wsd_line(spec: spec_lib.Spec, seconds: Callable[[Cell], float]) -> str | None:
  """What a sweep with WSD runs trains: the table prices each cell as a run of its own, but
  the cells of one size are cooldown branches of one run (sweeps/wsd.py): its main run's
  steps plus each branch's decay, against the cells' own steps; the time scaled alike, and
  divided among the cells the executor trains at once. None without WSD runs."""
  single, series = wsd.series(list(spec.cells), spec.config)
  if not series:
    return None
  fraction = float(spec.config.train.wsd.decay_fraction)
  W = sum(c.steps for c in single)
  S = W
  t = sum(seconds(c) for c in single)
  for _, group in series:
    branches = wsd.plan([c.D for c in group], fraction, group[0].batch_size * group[0].seq_len)
    w = wsd.trained_steps(branches)
    s = sum(c.steps for c in group)
    W, S, t = W + w, S + s, t + sum(seconds(c) for c in group) * w / s
  at_once = _at_once(spec)
  alone = f" and {len(single)} runs of their own" if single else ""
  # A cell has a second name once it is a branch: progress lines name the run, runs.jsonl
  # and report.md the branch.
  name, group = series[0]
  run = wsd.run_name(name)
  return (f"as {len(series)} WSD runs (one per size, its cells cooldown branches){alone}: "
          f"{W:,} steps, {W / S:.0%} of the cells' "
          f"{S:,}; about {table.duration(t)} of training"
          + (f", {table.duration(t / at_once)} with {at_once} at a time" if at_once > 1 else "")
          + f"\n  names: cell {group[0].name} trains as branch "
          f"{run}{wsd.branch_suffix(group[0].D)} of run {run} (progress lines name the run; "
          "runs.jsonl and report.md the branch)")


def _at_once(spec: spec_lib.Spec) -> int:
  """The cells the sweep will train at once: the packed executor's device groups, of the
  CPU split into `cpu_devices` as the sweep will split it (not yet, in a dry run)."""
  e = spec.executor
  if e.kind != "packed":
    return 1
  n = int(spec.config.get("cpu_devices") or 0)
  if n and jax.default_backend() == "cpu":
    return max(1, n // e.devices_per_cell)
  return len(executors.cell_devices(e) or [None])


# --------------------------------------------------------------------------- output


def _gib(b: int | None) -> str:
  return "–" if b is None else f"{b / hardware.GiB:.3g}"


def refusal(row: readiness.Row) -> str:
  why = row.train.error or (row.eval.error if row.eval else None)
  if why and not row.train.argument_bytes:  # never lowered: it does not shard over the target
    return f"{row.cell.name}: refused: {why}"
  need = (f"needs {'at least ' if why else ''}{_gib(row.hbm)} GiB of HBM per chip"
          + (f" > {_gib(row.budget)}" if row.budget else "") + (f" ({why})" if why else ""))
  fix = (f"fits with {' '.join(row.remedy)} ({_gib(row.remedy_hbm)} GiB/chip)" if row.remedy
         else "no remat, FSDP or grad_accum setting fits: use a larger slice or smaller batch")
  return f"{row.cell.name}: refused: {need}; {fix}"


def format_rows(rows: list[readiness.Row]) -> str:
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


def _resolved(r: readiness.Row) -> tuple[int, ...]:
  try:
    return mesh_lib.resolve_shape(r.setup.mesh, r.devices)
  except UserError:
    return r.setup.mesh


def _program_json(p: aot.Program | None) -> dict | None:
  if p is None:
    return None
  return {**dataclasses.asdict(p), "hbm_bytes": p.hbm_bytes}


def row_json(r: readiness.Row) -> dict:
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
      "cached": r.train.cached,
      "remedy": list(r.remedy) if r.remedy else None, "remedy_hbm_bytes": r.remedy_hbm,
  }


# --------------------------------------------------------------------------- the command


def run(spec: spec_lib.Spec, opts) -> int:
  """The whole dry run: the grid (no data), then with --compile the cells compiled. `opts`:
  the dry run's flags, .compile, .json and .headroom (`chinchax.cli.flags.DryRunFlags`)."""
  c, cells, refusals = spec.config, list(spec.cells), list(spec.refusals)
  if opts.compile is None:
    if opts.json:
      sizes, warnings = fit_forecast.forecast(cells, list(c.get("budgets") or ()),
                                              c.get("prior") or None)
      print(json.dumps({"cells": [{"name": x.name, "N": x.N, "D": x.D,
                                   "hbm_bytes_per_chip": None, "fits": None} for x in cells],
                        "refused": refusals, "fit_warnings": warnings}, indent=1))
      return 0
    seconds, how = time_model(spec.executor)
    if c.get("target"):  # the slice or node the sweep is for, not this machine
      gpu = hardware.gpu_node(c.target)
      if gpu:
        n, peak, name = gpu.count, gpu.peak_flops, gpu.name
      else:
        t = hardware.parse_target(c.target)
        n, peak, name = t.chips, t.chip.peak_flops, t.name
      rate = ASSUMED_MFU * peak * n
      seconds = lambda cell: cell.flops_6ND / rate
      how = (f"time at {ASSUMED_MFU:.0%} of the {n} x {fmt.num(peak)} "
             f"FLOP/s peak of the target {name} (6ND FLOPs)")
    rec = recipe_lib.from_config(c.recipe)
    print(table.format_table(cells, refusals, seconds=seconds, source=rec.source(),
                             notes=rec.law_notes(cells)))
    print(how)
    line = wsd_line(spec, seconds)
    if line:
      print(line)
    sizes, warnings = fit_forecast.forecast(cells, list(c.get("budgets") or ()),
                                            c.get("prior") or None)
    if sizes:
      print("sizes per budget for the fit (after the refusals above):")
      print("\n".join(sizes + [f"warning: {w}" for w in warnings]))
    print("unique tokens and the vocabulary are checked when the data is opened for training")
    return 0

  where = opts.compile or str(c.get("target", "") or "")
  if not where:
    raise UserError("--compile needs a target: set `target` in the config (e.g. "
                    "c.target = 'v5p:2x2x4') or write --compile=v5p:2x2x4 (or --compile=local)")
  target = None if where == "local" else (hardware.gpu_node(where)
                                          or hardware.parse_target(where))
  gpu = target if isinstance(target, hardware.GpuNode) else None
  devices = aot.target_devices(target)
  if spec.executor.kind == "packed":
    devices = devices[:spec.executor.devices_per_cell]
  capacity = aot.hbm_capacity(devices)
  budget = None if capacity is None else int(capacity * (1 - opts.headroom))
  say = lambda m: print(m, file=sys.stderr, flush=True)
  name = target.name if target else f"{len(devices)} x {devices[0].device_kind} (local)"
  say(f"compiling {len(cells)} cells for {name}, one at a time")
  t0 = time.perf_counter()
  groups = gpu.nodes if gpu else (target.slices if target else 1)
  rows = readiness.check(cells, c, devices, budget, groups, say)
  elapsed = time.perf_counter() - t0
  refused = [refusal(r) for r in rows if r.fits is False]
  if opts.json:
    print(json.dumps({"target": name, "chips": len(devices), "hbm_capacity_bytes": capacity,
                      "headroom": opts.headroom, "hbm_budget_bytes": budget,
                      "compile_s": elapsed, "cells": [row_json(r) for r in rows],
                      "refused": refused, "grid_refused": refusals,
                      **({"gpu": gpu_budget.facts(gpu, rows, devices)} if gpu else {})},
                     indent=1))
  else:
    print(format_rows(rows))
    room = (gpu_budget.room(gpu, capacity, opts.headroom, budget) if gpu and capacity else
            f"{_gib(capacity)} GiB HBM each, {opts.headroom:.0%} kept free: {_gib(budget)} GiB "
            "for the program" if capacity else "HBM capacity unknown: fits is not decided")
    verdict = (f"{sum(r.fits is True for r in rows)} fit, {len(refused)} refused" if capacity
               else f"{len(refused)} failed to compile")
    cached = sum(r.train.cached for r in rows)
    reused = (f" ({cached} read from the cache of earlier compiles, {aot_cache.folder()}; "
              "their compile s are the first compile's)" if cached else "")
    print(f"\n{len(rows)} cells compiled for {name} ({len(devices)} devices, {room}) in "
          f"{elapsed / 60:.1f} min{reused}; {verdict}")
    if gpu:
      print(gpu_budget.text(gpu, rows, devices, opts.headroom))
    for line in refused + refusals:
      print(f"  {line}")
  return 2 if refused else 0
