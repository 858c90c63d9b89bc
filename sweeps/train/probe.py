"""Held-out losses of a run's saved checkpoints, after the fact (`chinchax eval`).

The run is rebuilt from WORKDIR/config.json with `setup.make_model` (the model, the optimizer
state layout the checkpoints hold, the eval step). Each selected checkpoint (`all` and `last`
from WORKDIR/checkpoints/, `best` from WORKDIR/checkpoints_best/) is evaluated on the run's own
validation set ("validation") and on the validation split of every extra corpus (a directory
or glob, built like a training corpus) or prepared TFDS dataset, with the run's tokenizer and
sequence length, over the first `eval_tokens` tokens (default: the run's; "all": every whole
batch the split holds). The loss is the one of result.json: mean cross-entropy in nats per
target token.

`split` picks the split scored instead (`data.open_split`): "train" (the whole train split) or
"all" (every file of a text corpus, read from the files in path order, so a corpus too small
to give both splits a file is scored too; a TFDS dataset's train then validation split). The
run's own set is then named after the split ("train", "all"). Each set's size (files or
documents, tokens) goes to `say` before any checkpoint is scored.

Multiple-choice tasks (`tasks`; default the run's own `config.tasks`, so a probe of a run that
scored tasks scores them too) are scored at each checkpoint as the run scored them
(sweeps/train/tasks.py, by the same eval step: nothing more to compile): one line {"step",
"tokens", "task", "loss" (bits per byte of the correct choices), "accuracy", "loss_unit",
"items", "checkpoint"} per (checkpoint, task).

Output: WORKDIR/eval_probe.jsonl, one line {"step", "tokens", "set", "split", "eval_loss",
"eval_tokens", "checkpoint"} per (checkpoint, set), and the task lines; a later probe of the
same (step, set, split, eval_tokens), or of the same (step, task), replaces the earlier line.
The file is rewritten atomically.
"""

import dataclasses
import json
import math
import os

import jax
import orbax.checkpoint as ocp

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.sweeps import data
from chinchax.sweeps.data import packing, text_builder
from chinchax.sweeps.train import config as run_config
from chinchax.sweeps.train import hooks, setup
from chinchax.sweeps.train import tasks as task_eval

PROBE_FILE = "eval_probe.jsonl"
CHECKPOINTS = "checkpoints"


def select_steps(spec: str, saved: list[int], best: list[int]) -> list[tuple[str, int]]:
  """(checkpoint folder, step) pairs for `spec`; refuses steps that were not saved."""
  spec = spec.strip()
  if spec == "best":
    if not best:
      raise UserError(f"--steps=best: the run has no {hooks.BEST_DIR}/ (train with "
                      "checkpoint.keep_best=True or early_stop.patience > 0)")
    return [(hooks.BEST_DIR, max(best))]
  if not saved:
    raise UserError("the run has no checkpoints to evaluate")
  if spec == "last":
    return [(CHECKPOINTS, max(saved))]
  if spec == "all":
    return [(CHECKPOINTS, s) for s in sorted(saved)]
  try:
    wanted = [int(s) for s in spec.split(",") if s.strip()]
  except ValueError:
    raise UserError(f"--steps={spec!r}: use all, last, best or a comma list of steps") from None
  missing = [s for s in wanted if s not in saved and s not in best]
  if missing or not wanted:
    raise UserError(f"--steps={spec!r}: no checkpoint at {missing or spec}; saved steps: "
                    f"{sorted(set(saved) | set(best))}")
  return [(CHECKPOINTS if s in saved else hooks.BEST_DIR, s) for s in wanted]


def read_config(workdir: str):
  """The run's config.json over the train config's defaults (a key it lacks keeps its default)."""
  text = atomic.read_text(os.path.join(workdir, "config.json"))
  if text is None:
    raise UserError(f"{workdir}: no config.json; pass the folder of a `chinchax train` run")
  return run_config.with_defaults(json.loads(text))


def _key(r: dict) -> tuple:
  if "task" in r:
    return (r["step"], "task", r["task"])
  return (r["step"], r["set"], r.get("split", "validation"), r["eval_tokens"])


def write_probes(path: str, rows: list[dict]) -> None:
  key = _key
  old = [json.loads(l) for l in (atomic.read_text(path) or "").splitlines() if l.strip()]
  new = {key(r) for r in rows}
  kept = [r for r in old if key(r) not in new] + rows
  atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))


def probe(workdir: str, steps: str = "last", corpora=(), names=(),
          eval_tokens: int | str | None = None, split: str = "validation",
          say=None, tasks=None) -> list[dict]:
  """Evaluates the run in `workdir` (see the module docstring); returns the rows written.
  `tasks`: task names or .jsonl paths to score (None: the run's own, () none)."""
  atomic.check_backend(workdir)
  workdir = atomic.absolute(workdir)
  c = read_config(workdir)
  if tasks is not None:
    c.tasks = tuple(tasks)

  def steps_in(folder):
    return sorted(int(s) for s in atomic.listdir(os.path.join(workdir, folder)) if s.isdigit())

  chosen = select_steps(steps, steps_in(CHECKPOINTS), steps_in(hooks.BEST_DIR))
  # Fail before compute: every held-out set opens and holds the eval tokens.
  base = run_config.data_config(c)
  eval_tokens = eval_tokens or int(c.eval_tokens)
  wanted = None if eval_tokens == "all" else int(eval_tokens)
  sources = {split: base}
  for corpus in corpora:
    sources[corpus] = dataclasses.replace(base, corpus=corpus)
  for name in names:
    sources[name] = dataclasses.replace(base, corpus=None, name=name)
  sets, n_eval, sizes = {}, {}, {}
  for name, cfg in sources.items():
    sets[name], sizes[name] = _open_split(name, cfg, split, wanted)
    n_eval[name] = _n_batches(name, sizes[name], sets[name], wanted)
  for name, size in sizes.items():
    if say:
      whose = "the run's data, " if name == split else ""
      say(f"{name}: {whose}{size.split} split: {_count(size.documents, size.unit)}, "
          f"{size.tokens:,} tokens; scoring {n_eval[name] * c.batch_size * c.seq_len:,} "
          "of them")
  prepared = task_eval.prepare(c, sets[split].tokenizer)  # bad items: refused before compute
  model = setup.make_model(c, run_config.model_config(c, sets[split].vocab_size),
                           setup.make_mesh(c))
  tokens_per_step = c.batch_size * c.seq_len

  rows = []
  for folder, step in chosen:
    with ocp.CheckpointManager(os.path.join(workdir, folder)) as mgr:
      state = mgr.restore(step, args=ocp.args.StandardRestore(model.abstract))
    for name, ds in sets.items():
      loss = hooks.eval_loss_on(model.eval_step, state["params"], ds, n_eval[name],
                                 model.batch_sharding)
      rows.append({"step": step, "tokens": step * tokens_per_step, "set": name, "split": split,
                   "eval_loss": loss, "eval_tokens": n_eval[name] * tokens_per_step,
                   "checkpoint": folder})
    if prepared.rows:
      lls = task_eval.log_likelihoods(model.eval_step, state["params"], prepared,
                                      model.batch_sharding)
      for r, loglik in zip(prepared.rows, lls):
        loss, accuracy = task_eval.summary(r, loglik)
        rows.append({"step": step, "tokens": step * tokens_per_step, "task": r.task.name,
                     "loss": loss, "accuracy": accuracy, "loss_unit": task_eval.LOSS_UNIT,
                     "items": len(r.task.answers), "checkpoint": folder})
  if jax.process_index() == 0:
    write_probes(os.path.join(workdir, PROBE_FILE), rows)
  return rows


def _open_split(name: str, cfg: data.DataConfig, split: str, wanted: int | None):
  """`data.open_split`, whose refusal of a corpus too small to split says what scores it."""
  try:
    # The stream's first (wanted + a batch) tokens: what the eval reads, whole windows.
    extra = cfg.batch_size * (cfg.seq_len + 1)
    return data.open_split(cfg, split, None if wanted is None else wanted + extra)
  except text_builder.TooFewDocuments as e:
    raise UserError(f"{name}: {_count(e.n, 'files')}, too few to give both splits one (a file "
                    f"goes to validation with probability {e.val_fraction:g}, by a hash of its "
                    "path and bytes); score every file with --split=all") from None


def _n_batches(name: str, size, ds: data.Dataset, wanted: int | None) -> int:
  """Eval batches of `wanted` tokens (None: every whole batch) that the split holds."""
  B, L = ds.cfg.batch_size, ds.cfg.seq_len
  have = packing.n_windows(size.tokens, L)
  n = have // B if wanted is None else max(1, math.ceil(wanted / (B * L)))
  if n == 0 or n * B > have:
    need = (f"one batch of {B}" if wanted is None else
            f"the {n * B} that --eval_tokens={wanted} needs at the run's batch of {B}")
    todo = [] if wanted is None else ["lower --eval_tokens"]
    if size.split != "all":
      todo.append("score every file with --split=all")
    raise UserError(f"{name}: its {size.split} split holds {have} windows of {L} tokens "
                    f"({_count(size.documents, size.unit)}, {size.tokens:,} tokens), fewer than "
                    f"{need}; {' or '.join(todo) or 'add text'}")
  return n


def _count(n: int, unit: str) -> str:
  """'1 file', '40 files', '1,000 documents'."""
  return f"{n:,} {unit[:-1] if n == 1 else unit}"
