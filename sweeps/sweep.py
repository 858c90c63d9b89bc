"""`chinchax sweep`: every cell of a sweep grid trained, resumably, then fitted and reported.

    chinchax sweep [--config=PATH[:ARG]] [--config.KEY=VALUE ...] [--workdir=DIR] [--dry-run]

With no arguments: the built-in smoke sweep (sweeps/configs/smoke.py) in ./runs/smoke.

The order is fixed: executor check → the dataset opened once (its unique tokens bound the
grid, its tokenizer must match `vocab_size`) → the grid and its refusals → each cell's batch
checked against its devices → cells trained → `chinchax fit` → report.md. Everything that
cannot work is refused (one line, exit 2) before anything is compiled.

Layout, WORKDIR a local path or gs://bucket/path: WORKDIR/sweep.json (the resolved config),
WORKDIR/<cell>/ (train()'s files), WORKDIR/runs.jsonl (a line per finished cell),
WORKDIR/law.json, WORKDIR/plots/, WORKDIR/report.md. Cell names depend only on the config, so a
rerun finds its cells: done cells (result.json status done) are skipped, partial ones resume
from their checkpoints, failed ones are retried. Only process 0 writes the shared files.

The runner's own keys (`RUNNER_DEFAULTS`: executor, devices_per_cell, ray_*, bootstrap) are
accepted as `--config.KEY=VALUE` whether or not the config file sets them.
"""

import os
import sys
import time
from typing import Callable

import jax
import ml_collections

from chinchax.models import mesh as mesh_lib
from chinchax.models import sharding
from chinchax.scaling import atomic
from chinchax.scaling.errors import UserError
from chinchax.sweeps import checkpoint, compile_cache, data, executors, grid, hardware
from chinchax.sweeps import run_record
from chinchax.sweeps import train as train_lib

DEFAULT_CONFIG = os.path.join(os.path.dirname(__file__), "configs", "smoke.py")
DEFAULT_WORKDIR = os.path.join("runs", "smoke")

RUNNER_DEFAULTS = {
    "executor": "local",      # local | packed | ray (sweeps/executors.py)
    "devices_per_cell": 1,    # packed: devices of each cell's sub-mesh
    "ray_address": "",        # ray: the cluster to join; empty starts a local one
    "ray_num_cpus": 1.0,      # ray: resources each cell's task holds
    "ray_num_gpus": 0.0,
    "ray_tpus": 0,
    "bootstrap": 1000,        # resamples of the fit's intervals (0: none)
}

# --dry-run's time column. On CPU small models are overhead-bound, so a cell costs a fixed
# start (init and compile), a fixed cost per step and its FLOPs: the least-squares fit of
# these three to the smoke sweep's cells on two CPU cores. With a known peak: this fraction of it.
CPU_CELL_S = 7.0
CPU_STEP_S = 3.3e-3
CPU_FLOPS_PER_S = 4e10  # chinchilla FLOPs
ASSUMED_MFU = 0.3


# --------------------------------------------------------------------------- config


def _typed(key: str, text: str, like):
  text = text.strip()
  if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
    text = text[1:-1]
  try:
    if isinstance(like, bool):
      if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError(text)
      return text.lower() in ("true", "1")
    return type(like)(text)
  except ValueError:
    raise UserError(f"--config.{key}={text!r} is not a {type(like).__name__}") from None


def split_runner_flags(argv: list[str]) -> tuple[list[str], dict[str, str]]:
  """(argv without the runner's `--config.KEY=VALUE` flags, {KEY: VALUE})."""
  rest, runner = [], {}
  for arg in argv:
    if arg == "--dry-run":  # the documented spelling; absl's is --dry_run
      arg = "--dry_run"
    key, eq, value = arg.removeprefix("--config.").partition("=")
    if arg.startswith("--config.") and key in RUNNER_DEFAULTS:
      if not eq:
        raise UserError(f"{arg}: give a value, --config.{key}=VALUE")
      runner[key] = value
    else:
      rest.append(arg)
  return rest, runner


def with_runner_keys(c: ml_collections.ConfigDict,
                     overrides: dict[str, str]) -> ml_collections.ConfigDict:
  """A copy of the sweep config with every runner key: its own, a default, or an override."""
  c = ml_collections.ConfigDict(c.to_dict())
  for key, default in RUNNER_DEFAULTS.items():
    like = c.get(key, default)
    c[key] = _typed(key, overrides[key], like) if key in overrides else like
  if c.bootstrap < 0:
    raise UserError(f"bootstrap={c.bootstrap} must be >= 0")
  return c


def parse_flags(argv: list[str]):
  """(flags, config): `chinchax train`'s flags, with the smoke sweep as default config."""
  from chinchax.sweeps import train as train_lib  # pylint: disable=g-import-not-at-top
  return train_lib.parse_flags(argv, "chinchax sweep", DEFAULT_CONFIG, DEFAULT_WORKDIR)


def initialize_distributed(env=None, initialize=None) -> str | None:
  """Joins the multi-host job the environment describes; returns how, or None (one host)."""
  env = os.environ if env is None else env
  initialize = initialize or jax.distributed.initialize
  if env.get("JAX_NUM_PROCESSES"):
    # JAX_COORDINATOR_ADDRESS is read by jax itself.
    initialize(num_processes=int(env["JAX_NUM_PROCESSES"]),
               process_id=int(env.get("JAX_PROCESS_ID", "0")))
    return "JAX_NUM_PROCESSES"
  hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
  if len(hosts) > 1 or env.get("MEGASCALE_COORDINATOR_ADDRESS"):
    initialize()  # the TPU runtime's metadata names the coordinator and the processes
    return "TPU"
  return None


# --------------------------------------------------------------------------- before compute


def prepare(c: ml_collections.ConfigDict) -> tuple[list[grid.Cell], list[str], data.Dataset]:
  """The dataset (opened once), the grid and its refusals; UserError if nothing can run."""
  grid.check_config(c)
  ds = data.open_dataset(train_lib.data_config(c.train))
  data.check_vocab(ds.tokenizer, c.vocab_size)
  cells, refusals = grid.make_grid(c, unique_tokens=ds.unique_tokens)
  if not cells:
    raise UserError(f"no runnable cells: all {len(refusals)} were refused (first: "
                    f"{refusals[0] if refusals else 'none'})")
  return cells, refusals, ds


def _cell_devices(c: ml_collections.ConfigDict):
  if c.executor == "local":
    return jax.devices()
  if c.executor == "packed":
    return executors.device_groups(c.devices_per_cell)[0]
  return None  # ray: the worker's devices are only known there


def check_batches(cells: list[grid.Cell], c: ml_collections.ConfigDict) -> None:
  """Each cell's batch must split over the data-parallel shards of the devices it gets."""
  devices = _cell_devices(c)
  if devices is None:
    return
  m = c.train.mesh
  mesh = mesh_lib.make_mesh((m.data, m.fsdp, m.tensor), devices=devices)
  shards = sharding.batch_divisor(mesh, sharding.RULES)
  for cell in cells:
    micro = cell.batch_size // c.train.grad_accum
    if cell.batch_size % c.train.grad_accum or micro % shards:
      raise UserError(
          f"cell {cell.name}: batch {cell.batch_size} (grad_accum {c.train.grad_accum}) does "
          f"not split over the {shards} data-parallel shards of its {len(devices)} devices; "
          "use executor='packed' with a devices_per_cell that divides it, or set train.mesh")


def jobs_for(cells: list[grid.Cell], c: ml_collections.ConfigDict,
             workdir: str) -> list[executors.Job]:
  """One job per cell; with `fixed_n.schedule='wsd'` one WSD job per fixed size instead,
  whose cooldown branches at the series' D values become the rows of runs.jsonl (Hägele et
  al. 2024: one long run and k short decays cost less than k cosine runs)."""
  wsd = c.get("fixed_n", {}).get("schedule", "cosine") == "wsd"
  jobs, series = [], {}
  for cell in cells:
    if wsd and not cell.isoflop:
      series.setdefault(cell.N, []).append(cell)
      continue
    jobs.append(executors.Job(name=cell.name, config=cell.train_config(c),
                              workdir=os.path.join(workdir, cell.name), shape=cell.shape,
                              D=cell.D, budget=cell.budget if cell.isoflop else None))
  for group in series.values():
    longest = max(group, key=lambda cell: cell.D)
    name = longest.name.rsplit("-T", 1)[0] + "-wsd"
    cfg = longest.train_config(c)
    with cfg.unlocked():
      cfg.name = name
      cfg.optimizer.schedule = "wsd"
      cfg.wsd.branches = tuple(sorted(cell.D for cell in group))
    jobs.append(executors.Job(name=name, config=cfg, workdir=os.path.join(workdir, name),
                              shape=longest.shape, D=longest.D, budget=None))
  return jobs


def finished_records(job: executors.Job) -> list[dict] | None:
  """The job's records for runs.jsonl when all of it is done, else None."""
  if executors.is_wsd(job.config):
    from chinchax.sweeps import wsd  # pylint: disable=g-import-not-at-top
    branches = wsd.plan(job.config.wsd.branches, job.config.wsd.decay_fraction,
                        job.config.batch_size * job.config.seq_len,
                        job.config.optimizer.warmup_steps)
    dirs = [os.path.join(job.workdir, job.name + b.name_suffix) for b in branches]
  else:
    dirs = [job.workdir]
  records = [run_record.read_result(d) for d in dirs]
  if all(r is not None and r.get("status") == "done" for r in records):
    return records
  return None


def time_model(c: ml_collections.ConfigDict) -> tuple[Callable[[grid.Cell], float], str]:
  """(a cell's estimated seconds, how they are estimated) for --dry-run."""
  devices = _cell_devices(c) or jax.local_devices()[:1]
  peak = hardware.peak_flops(devices[0])
  if peak:
    rate = ASSUMED_MFU * peak * len(devices)
    return (lambda cell: cell.flops_6ND / rate), (
        f"time at {ASSUMED_MFU:.0%} of the {len(devices)} x {peak:.3g} FLOP/s peak of "
        f"{devices[0].device_kind}")
  return (lambda cell: CPU_CELL_S + cell.steps * CPU_STEP_S
          + cell.flops_chinchilla / CPU_FLOPS_PER_S), (
      f"time on CPU: {CPU_CELL_S:.0f} s per cell, {CPU_STEP_S * 1e3:.1f} ms per step and "
      f"{CPU_FLOPS_PER_S:.2g} FLOP/s (chinchilla), measured for small models on 2 cores")


# --------------------------------------------------------------------------- the sweep


def run_sweep(c: ml_collections.ConfigDict, workdir: str, *, quiet: bool = False,
              stop=None) -> int:
  """Trains every cell not done yet, then fits and reports; returns the exit status."""
  from chinchax.sweeps.cli import fit as cli_fit  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps import report  # pylint: disable=g-import-not-at-top

  executors.check(c)
  cells, refusals, _ = prepare(c)
  check_batches(cells, c)
  lead = jax.process_index() == 0
  say = (lambda m: print(m, flush=True)) if lead else (lambda m: None)
  for r in refusals:
    say(r)
  runs_path = os.path.join(workdir, "runs.jsonl")
  if lead:
    atomic.makedirs(workdir)
    atomic.write_text(os.path.join(workdir, "sweep.json"), c.to_json_best_effort(indent=2) + "\n")

  jobs = []
  all_jobs = jobs_for(cells, c, workdir)
  n = len(all_jobs)
  for i, job in enumerate(all_jobs):
    done = finished_records(job)
    if done is not None:
      losses = ", ".join(f"{r['eval_loss']:.4f}" for r in done)
      say(f"[{i + 1}/{n}] {job.name}: skipped, already done (eval loss {losses})")
      if lead:
        for r in done:
          run_record.upsert_runs_jsonl(runs_path, r)
    else:
      jobs.append(job)
  say(f"{len(jobs)} of {n} cells to train with executor={c.executor!r}")

  t0, finished, failed = time.time(), [0], []

  def on_result(job: executors.Job, record: dict) -> None:
    finished[0] += 1
    if record.get("status") == "done":
      say(f"[{finished[0]}/{len(jobs)}] {job.name}: done, eval loss "
          f"{record['eval_loss']:.4f} ({time.time() - t0:.0f} s into the sweep)")
    else:
      failed.append(job.name)
      say(f"[{finished[0]}/{len(jobs)}] {job.name}: failed: {record.get('reason')}")
    if lead:
      for r in record.get("branches") or [record]:
        run_record.upsert_runs_jsonl(runs_path, r)

  stop = stop if stop is not None else checkpoint.StopFlag().install()
  cell_quiet = quiet or c.executor != "local"
  if not executors.run_jobs(jobs, on_result, c, stop=stop, quiet=cell_quiet):
    say("sweep stopped; finished cells are recorded, rerun the same command to resume")
    return 143
  if failed:
    say(f"{len(failed)} cells failed: {', '.join(failed)}")
  if not lead:
    return 0

  fit_error = None
  try:
    cli_fit.main([workdir, f"--out={os.path.join(workdir, 'law.json')}",
                  f"--plots={os.path.join(workdir, 'plots')}", f"--bootstrap={c.bootstrap}"])
  except UserError as e:
    fit_error = str(e)
    print(f"chinchax sweep: the fit failed: {fit_error}", file=sys.stderr)
  say(f"wrote {report.write_report(workdir, fit_error=fit_error)}")
  return 1 if fit_error else 0


def load_config(argv: list[str]):
  """(flags, the sweep config with the runner's keys) from the command line."""
  argv, runner = split_runner_flags(argv)
  fv, c = parse_flags(argv)
  return fv, with_runner_keys(c, runner)


def main(argv: list[str]) -> int:
  compile_cache.enable()
  fv, c = load_config(argv)
  initialize_distributed()
  if fv.dry_run:
    executors.check(c)
    cells, refusals, _ = prepare(c)
    seconds, how = time_model(c)
    print(grid.format_table(cells, refusals, seconds=seconds))
    print(how)
    return 0
  return run_sweep(c, fv.workdir, quiet=fv.quiet)
