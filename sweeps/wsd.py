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
"""

import dataclasses
import math
import os

import ml_collections

from chinchax.scaling import atomic
from chinchax.scaling.errors import UserError


@dataclasses.dataclass(frozen=True)
class Branch:
  D: float          # the tokens the branch ends at (as asked)
  total_steps: int  # T_i
  start: int        # s_i: the main run's step the branch starts from
  decay_steps: int  # decay_i

  @property
  def name_suffix(self) -> str:
    return f"-D{self.D:.3g}".replace("+", "")


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
      raise UserError(f"wsd branch at D={D:.3g} would start its decay at step {start}, inside "
                      f"the {warmup_steps}-step warmup; use a larger D or fewer warmup steps")
    out.append(Branch(D, T, start, decay))
  return out


def branch_points_dir(workdir: str, step: int) -> str:
  return os.path.join(atomic.absolute(workdir), "branch_points", f"step_{step}")


def main_config(c: ml_collections.ConfigDict, branches: list[Branch]) -> ml_collections.ConfigDict:
  """The stable run: constant LR to the last branch point, saving the state at each."""
  m = c.copy_and_resolve_references()
  tokens_per_step = c.batch_size * c.seq_len
  with m.unlocked():
    m.optimizer.schedule = "constant"
    m.tokens = float(max(b.start for b in branches) * tokens_per_step)
    m.wsd.branches = ()
    m.wsd.save_steps = tuple(b.start for b in branches)
  return m


def branch_config(c: ml_collections.ConfigDict, b: Branch, workdir: str) -> ml_collections.ConfigDict:
  """Branch `b`: a 'wsd' run of T_i steps that starts from the main run's state at s_i."""
  r = c.copy_and_resolve_references()
  with r.unlocked():
    r.name = c.name + b.name_suffix
    r.tokens = float(b.total_steps * c.batch_size * c.seq_len)
    r.optimizer.schedule = "wsd"
    r.optimizer.decay_fraction = float(c.wsd.decay_fraction)
    r.wsd.branches = ()
    r.wsd.save_steps = ()
    r.init_from = branch_points_dir(workdir, b.start)
    r.branch_of = c.name
  return r


def train_wsd(c: ml_collections.ConfigDict, workdir: str, *, stop=None, quiet=False,
              devices=None) -> dict:
  """Runs the stable run in `workdir`, then each branch in `workdir/<name>-D<D_i>`.

  Returns {"status", "main": record, "branches": [record, ...]}; status is "stopped" when a
  stop flag interrupted any part (rerun to resume: finished parts are skipped).
  """
  from chinchax.sweeps import train as train_lib  # pylint: disable=g-import-not-at-top

  branches = plan(c.wsd.branches, c.wsd.decay_fraction, c.batch_size * c.seq_len,
                  c.optimizer.warmup_steps)
  main = train_lib.train(main_config(c, branches), workdir, stop=stop, quiet=quiet,
                         devices=devices)
  out = {"status": main.get("status"), "main": main, "branches": []}
  if main.get("status") != "done":
    return out
  for b in branches:
    rec = train_lib.train(branch_config(c, b, workdir), os.path.join(workdir, c.name + b.name_suffix),
                          stop=stop, quiet=quiet, devices=devices)
    out["branches"].append(rec)
    if rec.get("status") != "done":
      out["status"] = rec.get("status")
      break
  return out
