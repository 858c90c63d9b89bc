"""Warmup–stable–decay runs with cooldown branches (Hägele et al. 2024).

One long run at a constant learning rate plus k short cooldowns branched off it gives k points
(N, D_i, loss_i) for about the cost of one run of max D_i, where k cosine runs would cost
sum D_i. For a branch ending at D_i tokens, with `tokens_per_step` = batch_size · seq_len:

    T_i     = ceil(D_i / tokens_per_step)                    (its steps, as for any run)
    decay_i = max(1, round(decay_fraction · T_i))            (`optimizer.schedule('wsd')`)
    s_i     = T_i − decay_i                                  (its branch point)

The main run trains to max s_i with warmup then the constant peak LR (`schedule='constant'`),
saving its state at every s_i under `WORKDIR/branch_points/step_<s_i>/`. Branch i is an
ordinary run in `WORKDIR/<name>-D<D_i>/` with `schedule='wsd'` over T_i steps, which starts from
the state at s_i: up to s_i its schedule equals the main run's (the same warmup and plateau)
and batch k is a function of (seed, k), so the branch is exactly the run that a single WSD run
of T_i steps would have been. Each branch writes its own result.json (`schedule: "wsd"`,
`branch_of: <name>`); the main run's record is a constant-LR record and not a scaling point.

Cost: the main run trains max s_i steps, each branch decay_i steps, so WSD spends
(max s_i + sum decay_i) · tokens_per_step tokens against sum T_i · tokens_per_step for
cosine runs.

In a sweep, the fixed-N series of one size (`fixed_n.schedule='wsd'`) becomes one WSD job
named `<series>-wsd` (`job_config`); its rows of runs.jsonl are its branches' records
(`records`, `finished`). With `schedule='wsd'` the IsoFLOP cells of one shape and batch become
one WSD job too, a branch at each of their budgets' D: `wsd.budgets` gives each branch its
nominal C, which its record carries as any IsoFLOP cell's does (the fit groups budgets by it). WSD runs its parts with the single run (sweeps/train/), which knows
nothing of WSD: a branch is a run with `init_from`, the main run one with `wsd.save_steps`.
"""

import dataclasses
import math
import os

import ml_collections

from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.scaling.runs import records
from chinchax.sweeps import grid
from chinchax.sweeps.train import hooks, loop


@dataclasses.dataclass(frozen=True)
class Branch:
  D: float          # the tokens the branch ends at (as asked)
  total_steps: int  # T_i
  start: int        # s_i: the main run's step the branch starts from
  decay_steps: int  # decay_i


def branch_suffix(D: float) -> str:
  """What a branch ending at D tokens adds to its run's name: `-D8.25e05`."""
  return f"-D{D:.3g}".replace("+", "")


def branch_name(c: ml_collections.ConfigDict, b: Branch) -> str:
  """Branch `b`'s run name (and folder name) in the WSD run `c`: `<run>-D<D>`."""
  return c.name + branch_suffix(b.D)


def run_name(series: str) -> str:
  """The WSD run of a series of cells: `<series>-wsd`."""
  return f"{series}-wsd"


def plan(branches_D, decay_fraction: float, tokens_per_step: int,
         warmup_steps: int = 0) -> list[Branch]:
  """The branches sorted by D; refuses any whose decay would start inside the warmup."""
  if not 0 < decay_fraction < 1:
    raise UserError(f"wsd.decay_fraction={decay_fraction} must be in (0, 1)")
  Ds = sorted(float(D) for D in branches_D)
  if not Ds:
    raise UserError("wsd.branches is empty: give the token counts D_1, ..., D_k to cool down at")
  if len(set(Ds)) < len(Ds):
    raise UserError(f"wsd.branches={tuple(branches_D)} repeats a token count")
  out = []
  for D in Ds:
    if not D > 0:
      raise UserError(f"wsd.branches: D={D} must be positive")
    T = max(1, math.ceil(D / tokens_per_step))
    decay = max(1, round(decay_fraction * T))
    start = T - decay
    if start <= warmup_steps:
      raise UserError(f"wsd branch at D={fmt.num(D)} would start its decay at step {start}, "
                      f"inside the {warmup_steps}-step warmup; use a larger D or fewer warmup "
                      "steps")
    out.append(Branch(D, T, start, decay))
  return out


def trained_steps(branches: list[Branch]) -> int:
  """The steps a WSD run trains: its main run to the last branch point, then each decay."""
  return max(b.start for b in branches) + sum(b.decay_steps for b in branches)


def branches_of(c: ml_collections.ConfigDict) -> list[Branch]:
  """The branches a WSD run config asks for (`wsd.branches`)."""
  return plan(c.wsd.branches, c.wsd.decay_fraction, c.batch_size * c.seq_len,
              c.optimizer.warmup_steps)


def is_wsd(c: ml_collections.ConfigDict) -> bool:
  """A WSD run: one stable run whose cooldown branches are the records."""
  return bool(c.wsd.branches)


def branch_workdir(c: ml_collections.ConfigDict, workdir: str, b: Branch) -> str:
  return os.path.join(workdir, branch_name(c, b))


def series(cells, c: ml_collections.ConfigDict) -> tuple[list, list[tuple[str, list]]]:
  """(the cells trained one run each, [(series name, its cells)] trained as one WSD run each).

  With `fixed_n.schedule='wsd'` the cells of one fixed size form a series that keeps the
  grid's series name; with `schedule='wsd'` the IsoFLOP cells of one shape, batch and LR form
  one named `C-N<N>`, with the shape and batch added when two series share that name.
  """
  single, groups = [], {}
  for cell in cells:
    if c.fixed_n.schedule == "wsd" and not cell.isoflop:
      groups.setdefault(cell.series, []).append(cell)
    elif c.schedule == "wsd" and cell.isoflop:
      groups.setdefault((cell.shape, cell.batch_size, cell.seq_len, cell.peak_lr), []).append(cell)
    else:
      single.append(cell)
  names = [key if isinstance(key, str) else _isoflop_series_name(group[0].name)
           for key, group in groups.items()]
  out = []
  for group, name in zip(groups.values(), names):
    if names.count(name) > 1:
      name = f"{name}-{grid.shape_tag(group[0].shape)}-B{group[0].batch_size}"
    out.append((name, group))
  return single, out


def _isoflop_series_name(cell_name: str) -> str:
  """`C-N<N>` for the cells of one shape; an LR x batch grid's cell keeps its LR and batch
  (`C-N<N>-lr<f>-b<f>`), which tell its runs apart."""
  if "-lr" in cell_name:
    return "C-" + cell_name.split("-", 1)[1]
  return "C-" + cell_name.split("-")[1]


def job_config(series: str, longest: ml_collections.ConfigDict, Ds, budgets=(),
               warmup_steps: int | None = None) -> ml_collections.ConfigDict:
  """The WSD job of cells of one shape and batch: `longest` (the train config of the largest
  D) with a cooldown branch at each of `Ds`, named `<series>-wsd`. `budgets`: each D's
  nominal C (IsoFLOP cells; empty for a fixed-N series). `warmup_steps`: the shared warmup
  (the shortest cell's, so that every branch decays after it), default longest's."""
  order = sorted(range(len(Ds)), key=lambda i: Ds[i])
  cfg = longest.copy_and_resolve_references()
  with cfg.unlocked():
    cfg.name = run_name(series)
    cfg.budget = 0.0  # the stable run is no IsoFLOP point; its branches carry `wsd.budgets`
    cfg.optimizer.schedule = "wsd"
    if warmup_steps is not None:
      cfg.optimizer.warmup_steps = int(warmup_steps)
    cfg.wsd.branches = tuple(float(Ds[i]) for i in order)
    cfg.wsd.budgets = tuple(float(budgets[i]) for i in order) if budgets else ()
  return cfg


def branch_budget(c: ml_collections.ConfigDict, b: Branch) -> float:
  """The nominal C of branch `b` (`wsd.budgets`), or 0.0 (none: not an IsoFLOP point)."""
  budgets = tuple(c.wsd.get("budgets", ()))
  if not budgets:
    return 0.0
  if len(budgets) != len(c.wsd.branches):
    raise UserError(f"wsd.budgets has {len(budgets)} values for {len(c.wsd.branches)} "
                    "branches; give one budget per branch, or none")
  return float(dict(zip(map(float, c.wsd.branches), budgets))[float(b.D)])


def main_config(c: ml_collections.ConfigDict, branches: list[Branch]) -> ml_collections.ConfigDict:
  """The stable run: constant LR to the last branch point, saving the state at each."""
  m = c.copy_and_resolve_references()
  tokens_per_step = c.batch_size * c.seq_len
  with m.unlocked():
    m.optimizer.schedule = "constant"
    m.tokens = float(max(b.start for b in branches) * tokens_per_step)
    m.budget = 0.0
    m.wsd.branches = ()
    m.wsd.budgets = ()
    m.wsd.save_steps = tuple(b.start for b in branches)
    if not (c.wsd.stable_evals or c.early_stop.patience or c.checkpoint.keep_best):
      # No periodic eval (the loop evaluates at multiples of eval_every before the last step).
      m.eval_every = max(b.start for b in branches)
  return m


def branch_config(c: ml_collections.ConfigDict, b: Branch, workdir: str) -> ml_collections.ConfigDict:
  """Branch `b`: a 'wsd' run of T_i steps that starts from the main run's state at s_i."""
  r = c.copy_and_resolve_references()
  with r.unlocked():
    r.name = branch_name(c, b)
    r.tokens = float(b.total_steps * c.batch_size * c.seq_len)
    r.optimizer.schedule = "wsd"
    r.optimizer.decay_fraction = float(c.wsd.decay_fraction)
    r.budget = branch_budget(c, b)
    r.wsd.branches = ()
    r.wsd.budgets = ()
    r.wsd.save_steps = ()
    r.init_from = hooks.branch_point_dir(workdir, b.start)
    r.branch_of = c.name
  return r


@dataclasses.dataclass(frozen=True)
class Result:
  """A WSD run: its status ("done", "failed" or "stopped") and the records of its parts."""

  status: str
  main: dict
  branches: tuple[dict, ...]

  @property
  def records(self) -> tuple[dict, ...]:
    """Its rows of runs.jsonl: the branches (the stable run is no scaling point), or the
    stable run's record when it failed before any branch."""
    return self.branches or (self.main,)


def train_wsd(c: ml_collections.ConfigDict, workdir: str, **run_args) -> Result:
  """Runs the stable run in `workdir`, then each branch in `workdir/<name>-D<D_i>`.

  `run_args` go to every part's `loop.train` (stop, quiet, devices, checkpoint_lock). A
  branch whose run ends failed (it diverged, say) is its own record and the branches after it
  still train, as in a sweep (`job.run`); a stop flag ends the run ("stopped": rerun to
  resume, finished parts are skipped); an exception ends the command, where `job.run` makes
  it the branch's failed record.
  """
  main = train_main(c, workdir, **run_args)
  if main.get("status") != "done":
    return Result(main.get("status"), main, ())
  done = train_branches(c, lambda b: train_branch(c, workdir, b, **run_args))
  return Result(status_of(done), main, tuple(done))


def train_branches(c: ml_collections.ConfigDict, train_one) -> list[dict]:
  """`train_one(b)` for each branch in D order, their records: a failed branch does not end
  the run, a stopped one does (the one rule of `train_wsd` and of a sweep's `job.run`)."""
  done = []
  for b in branches_of(c):
    done.append(train_one(b))
    if done[-1].get("status") == "stopped":
      break
  return done


def train_main(c: ml_collections.ConfigDict, workdir: str, **run_args) -> dict:
  """The stable run's record. Once it is done each branch is a run of its own, which need
  not follow it (the packed executor gives each to whichever worker is free)."""
  return loop.train(main_config(c, branches_of(c)), workdir, **run_args)


def train_branch(c: ml_collections.ConfigDict, workdir: str, b: Branch, **run_args) -> dict:
  """Branch `b`'s record: its decay from the stable run's state at `b.start`."""
  return loop.train(branch_config(c, b, workdir), branch_workdir(c, workdir, b), **run_args)


def status_of(branches: list[dict]) -> str:
  """The status of a WSD run whose stable run is done, from its branches' records: stopped
  when any stopped, else failed when any failed, else done."""
  statuses = [r.get("status") for r in branches]
  return next((s for s in ("stopped", "failed") if s in statuses), "done")


def finished(c: ml_collections.ConfigDict, workdir: str) -> tuple[dict, ...] | None:
  """The branches' records when every branch of the WSD run in `workdir` is done, else None."""
  done = [records.read_result(branch_workdir(c, workdir, b)) for b in branches_of(c)]
  if all(r is not None and r.get("status") == "done" for r in done):
    return tuple(done)
  return None


def describe_lines(c) -> tuple[str, ...]:
  """What `chinchax train --dry-run` adds to a run's plan when the run is a WSD run."""
  if not is_wsd(c):
    return ()
  return ("WSD: a constant-LR run, then a cooldown branch at each of " + ", ".join(
      f"D={fmt.num(b.D, 4)} (steps {b.start}-{b.total_steps})" for b in branches_of(c)),)
