"""Every cell of a sweep compiled for its target before any chip is rented: does it fit, and
if not, which setting makes it fit (`chinchax sweep --dry-run --compile`, sweeps/dry_run.py).

    rows = readiness.check(cells, config, aot.target_devices(target), budget=hbm_bytes)

Cells with the same shape, batch and setting compile once, one at a time, the riskiest first
(`compile_order`: the largest cell of each budget, then the rest). libtpu's compiler runs its
own threads, and two compiles in one process contend for them (the v5p config on 2 cores: its
first 10 cells took 1026 s two at a time, its first 9 took 756 s one at a time, on a host
running about 40% slower than its best). What a compile reports is kept on disk
(`sweeps.accel.aot_cache`), so a repeated dry run compiles only the cells that changed. A row's HBM
per chip is the larger of its train step's and its eval step's (`sweeps.accel.aot`); it fits when
that is within the budget (the chip's usable HBM less the headroom) and both steps compile.
For a cell that does not fit, these settings are tried in order and the first that fits is
its remedy: FSDP over the whole slice, remat minimal, both, remat full, both, then gradient
accumulation 2, 4, 8 on top of FSDP and full remat.
"""

import concurrent.futures
import dataclasses
import time
from typing import Protocol

import ml_collections

from chinchax.errors import UserError
from chinchax.models import sharding as mesh_lib
from chinchax.models.config import ModelConfig
from chinchax.scaling.runs import conventions
from chinchax.sweeps.accel import aot
from chinchax.sweeps.chips import hardware
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import optimizer


class Cell(Protocol):
  """What readiness reads of a sweep's cell (sweeps/grid.py's `Cell`, which it does not import:
  accelerator readiness sits below the sweep)."""

  name: str
  budget: float
  N: int
  shape: conventions.Shape
  steps: int
  batch_size: int
  seq_len: int

  def train_config(self, sweep_cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    ...


def setup_for(cell: Cell, c: ml_collections.ConfigDict) -> aot.Setup:
  """What a cell's run compiles: its shape and batch, the config's numerics, mesh, sharding,
  and its steps per dispatch as the trainer takes them (sweeps/train/loop.py `chunk_size`:
  one while a sequence-length warmup changes the batches' shape)."""
  t = cell.train_config(c)
  m = t.model
  model = ModelConfig(cell.shape, compute_dtype=m.compute_dtype, param_dtype=m.param_dtype,
                      remat=m.remat, z_loss=m.z_loss, attention=m.attention)
  K = 1 if len(run_config.lengths(t).stages) > 1 else int(t.steps_per_dispatch)
  return aot.Setup(model, optimizer.OptimizerConfig(**t.optimizer.to_dict()), cell.steps,
                   (t.mesh.data, t.mesh.fsdp, t.mesh.tensor), t.sharding, cell.batch_size,
                   t.grad_accum, K)


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
  cell: Cell
  setup: aot.Setup
  train: aot.Program
  eval: aot.Program | None
  budget: int | None                     # HBM bytes per chip the program may use
  devices: int = 1
  remedy: tuple[str, ...] | None = None  # overrides that make it fit
  remedy_hbm: int | None = None

  @property
  def hbm(self) -> int:
    return _hbm((self.train, self.eval))

  @property
  def fits(self) -> bool | None:
    if self.train.error or (self.eval and self.eval.error):
      return False
    return None if self.budget is None else self.hbm <= self.budget

  @property
  def analytic_flops(self) -> float:
    tokens = self.cell.batch_size * self.cell.seq_len
    return conventions.flops_per_token(self.cell.shape, "chinchilla") * tokens


def _hbm(programs) -> int:
  train, ev = programs
  return max(train.hbm_bytes, ev.hbm_bytes if ev else 0)


def _fits(programs, budget) -> bool:
  train, ev = programs
  if train.error or (ev and ev.error):
    return False
  return budget is None or _hbm(programs) <= budget


def compile_order(cells: list[Cell]) -> list[int]:
  """Indices of `cells`, the riskiest first: the largest cell of each budget (largest budget
  first), then the rest from the largest down. A budget's cells share a batch, and its
  largest N holds the most state and activations per chip (in the v5p config each budget's
  largest cell needs the most HBM of its budget), so the first few compiles of a dry run
  (5 min for the v5p config's five budgets on 2 cores) say whether any cell may not fit."""
  by_size = sorted(range(len(cells)), key=lambda i: (-cells[i].N, -cells[i].batch_size))
  heads = {}
  for i in by_size:
    heads.setdefault(cells[i].budget, i)
  first = sorted(heads.values(), key=lambda i: (-cells[i].budget, -cells[i].N))
  return first + [i for i in by_size if i not in heads.values()]


def check(cells: list[Cell], c: ml_collections.ConfigDict, devices: list,
          budget: int | None, slices: int = 1, say=lambda m: None,
          workers: int | None = None) -> list[Row]:
  """Compiles every cell (each distinct setup once) and looks for remedies."""
  setups = [setup_for(cell, c) for cell in cells]
  key = lambda s: (s.model, s.mesh, s.mode, s.batch_size, s.grad_accum, s.K)
  first, names = {}, {}
  for i in compile_order(cells):
    first.setdefault(key(setups[i]), setups[i])
    names.setdefault(key(setups[i]), cells[i].name)
  t0 = time.perf_counter()
  results: dict = {}
  with concurrent.futures.ThreadPoolExecutor(workers or 1) as pool:
    futures = {}
    for k, s in first.items():  # tracing stays on this thread; the compiler runs on the pool
      try:
        low = aot.lower(s, devices)
      except UserError as e:  # this cell cannot shard over the target: refused, not fatal
        results[k] = (aot.Program(0, error=str(e)), None)
        continue
      futures[pool.submit(aot.compile_lowered, low)] = k
    for i, f in enumerate(futures):  # in the order submitted: the riskiest first
      results[futures[f]] = f.result()
      train, ev = results[futures[f]]
      # One line per compile, with what a table row needs: a run cut short still leaves one.
      say(f"compiled {i + 1}/{len(futures)} ({time.perf_counter() - t0:.0f} s): "
          f"{names[futures[f]]} {_hbm((train, ev)) / hardware.GiB:.2f} GiB/chip, "
          f"compiled in {train.compile_s + (ev.compile_s if ev else 0.0):.0f} s"
          + (" (read from the cache)" if train.cached else "")
          + ("" if budget is None or _fits((train, ev), budget) else ", DOES NOT FIT")
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
    say(f"{row.cell.name}: with {' '.join(flags)}: {_hbm(programs) / hardware.GiB:.2f} GiB/chip")
    if _fits(programs, row.budget):
      return dataclasses.replace(row, remedy=flags, remedy_hbm=_hbm(programs))
  return row
