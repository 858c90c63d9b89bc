"""`chinchax eval`: held-out losses of a run's saved checkpoints, after the fact (probing).

    chinchax eval --workdir=DIR [--steps=all|last|best|S1,S2] [--data.corpus=PATH ...]
                  [--data.name=TFDS ...] [--eval_tokens=N]

The run is rebuilt from DIR/config.json (model, optimizer state layout, tokenizer). Each
selected checkpoint (`all` and `last` from DIR/checkpoints/, `best` from
DIR/checkpoints_best/) is evaluated on the run's own validation set ("validation") and on the
validation split of every extra corpus (`--data.corpus`, built like a training corpus) or
prepared TFDS dataset (`--data.name`), with the run's tokenizer and sequence length, over the
first `eval_tokens` tokens (default: the run's). The loss is the one of result.json: mean
cross-entropy in nats per target token.

Output: DIR/eval_probe.jsonl, one line {"step", "tokens", "set", "eval_loss",
"eval_tokens"} per (checkpoint, set); a later probe of the same (step, set, eval_tokens)
replaces the earlier line. The file is rewritten atomically.
"""

import argparse
import dataclasses
import json
import os

from chinchax.scaling import atomic
from chinchax.scaling.errors import UserError

PROBE_FILE = "eval_probe.jsonl"


def parse_args(argv: list[str]) -> argparse.Namespace:
  p = argparse.ArgumentParser(prog="chinchax eval", description=__doc__.splitlines()[0])
  p.add_argument("--workdir", required=True, help="the run's folder (config.json, checkpoints/)")
  p.add_argument("--steps", default="last", help="all | last | best | comma list of steps")
  p.add_argument("--data.corpus", dest="corpus", action="append", default=[],
                 help="extra held-out corpus (directory or glob of text); repeatable")
  p.add_argument("--data.name", dest="name", action="append", default=[],
                 help="extra held-out prepared TFDS dataset; repeatable")
  p.add_argument("--eval_tokens", type=int, default=None, help="tokens per set (default: run's)")
  p.add_argument("--quiet", action="store_true")
  try:
    return p.parse_args(argv)
  except SystemExit as e:
    if e.code:
      raise UserError("bad arguments; see chinchax eval --help") from None
    raise


def select_steps(spec: str, saved: list[int], best: list[int]) -> list[tuple[str, int]]:
  """(checkpoint folder, step) pairs for `spec`; refuses steps that were not saved."""
  from chinchax.sweeps import train  # pylint: disable=g-import-not-at-top
  spec = spec.strip()
  if spec == "best":
    if not best:
      raise UserError(f"--steps=best: the run has no {train.BEST_DIR}/ (train with "
                      "checkpoint.keep_best=True or early_stop.patience > 0)")
    return [(train.BEST_DIR, max(best))]
  if not saved:
    raise UserError("the run has no checkpoints to evaluate")
  if spec == "last":
    return [("checkpoints", max(saved))]
  if spec == "all":
    return [("checkpoints", s) for s in sorted(saved)]
  try:
    wanted = [int(s) for s in spec.split(",") if s.strip()]
  except ValueError:
    raise UserError(f"--steps={spec!r}: use all, last, best or a comma list of steps") from None
  missing = [s for s in wanted if s not in saved and s not in best]
  if missing or not wanted:
    raise UserError(f"--steps={spec!r}: no checkpoint at {missing or spec}; saved steps: "
                    f"{sorted(set(saved) | set(best))}")
  return [("checkpoints" if s in saved else train.BEST_DIR, s) for s in wanted]


def read_config(workdir: str):
  import ml_collections  # pylint: disable=g-import-not-at-top
  text = atomic.read_text(os.path.join(workdir, "config.json"))
  if text is None:
    raise UserError(f"{workdir}: no config.json; pass the folder of a `chinchax train` run")
  return ml_collections.ConfigDict(json.loads(text))


def write_probes(path: str, rows: list[dict]) -> None:
  key = lambda r: (r["step"], r["set"], r["eval_tokens"])
  old = [json.loads(l) for l in (atomic.read_text(path) or "").splitlines() if l.strip()]
  new = {key(r) for r in rows}
  kept = [r for r in old if key(r) not in new] + rows
  atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def main(argv: list[str]) -> int:
  args = parse_args(argv)
  import jax  # pylint: disable=g-import-not-at-top
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  from chinchax.models import mesh as mesh_lib, sharding  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps import data, optimizer, train  # pylint: disable=g-import-not-at-top
  from chinchax.sweeps import step as step_lib  # pylint: disable=g-import-not-at-top

  atomic.check_backend(args.workdir)
  workdir = atomic.absolute(args.workdir)
  c = read_config(workdir)
  log = (lambda *_: None) if args.quiet else (lambda m: print(m, flush=True))

  def steps_in(folder):
    return sorted(int(s) for s in atomic.listdir(os.path.join(workdir, folder)) if s.isdigit())

  chosen = select_steps(args.steps, steps_in("checkpoints"), steps_in(train.BEST_DIR))

  # Fail before compute: every held-out set opens and holds the eval tokens.
  base = train.data_config(c)
  sets = {"validation": data.open_dataset(base)}
  for corpus in (x for arg in args.corpus for x in arg.split(",") if x):
    sets[corpus] = data.open_dataset(dataclasses.replace(base, corpus=corpus))
  for name in (x for arg in args.name for x in arg.split(",") if x):
    sets[name] = data.open_dataset(dataclasses.replace(base, corpus=None, name=name))
  eval_tokens = args.eval_tokens or int(c.eval_tokens)
  n_eval = {k: data.n_eval_batches(ds, eval_tokens) for k, ds in sets.items()}

  model_cfg = train.model_config(c, sets["validation"].vocab_size)
  mesh = mesh_lib.make_mesh((c.mesh.data, c.mesh.fsdp, c.mesh.tensor))
  rules, mode = sharding.RULES, c.sharding
  batch_sharding = sharding.batch_sharding(mesh, rules)
  opt_cfg = train.optimizer_config(c)
  tx = optimizer.make(opt_cfg)  # the trainer's: its state restores the trainer's checkpoints
  abstract, _ = step_lib.state_shardings(model_cfg, tx, mesh, rules, mode)
  eval_step = step_lib.make_eval_step(model_cfg, tx, mesh, rules, mode)
  tokens_per_step = c.batch_size * c.seq_len

  rows = []
  for folder, step in chosen:
    with ocp.CheckpointManager(os.path.join(workdir, folder)) as mgr:
      state = mgr.restore(step, args=ocp.args.StandardRestore(abstract))
    for name, ds in sets.items():
      loss = train.eval_loss_on(eval_step, state["params"], ds, n_eval[name], batch_sharding)
      rows.append({"step": step, "tokens": step * tokens_per_step, "set": name,
                   "eval_loss": loss, "eval_tokens": n_eval[name] * tokens_per_step,
                   "checkpoint": folder})
      log(f"step {step} ({folder}) | {name}: {loss:.4f} nats/token")
  if jax.process_index() == 0:
    write_probes(os.path.join(workdir, PROBE_FILE), rows)
  return 0
