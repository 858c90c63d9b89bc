"""Multiple-choice tasks scored at every evaluation of a run (`config.tasks`).

Per (item, choice) row (sweeps/data/choices.py) the log-likelihood of the choice given the
context, summed over its tokens, from the run's own eval step (its `row_loss_sums`): the rows
of every task are stacked and cut into batches of the eval batch's shape (the run's batch x
seq_len, rows split over the batch axes), so scoring compiles no program of its own, at any
evaluation point, and takes ceil(rows / batch) calls of it. Then per task:

    loss     = -sum over items of log p(correct choice) / (ln 2 · its UTF-8 bytes, summed)
               bits per byte of the correct continuations, pooled as the eval's bits per byte
    accuracy = mean over items of [argmax_j log p(choice j) / bytes(choice j) == answer]
               length-normalised (per byte), so a long choice is not penalised for its length

Bytes rather than tokens make both independent of the tokenizer. Each evaluation writes one
metrics.jsonl row, {"step", "tokens", "tasks": {name: {"loss", "accuracy"}}}, and the run
record gets `tasks`: {name: {loss, accuracy (the last evaluation's), loss_unit "bpb", chance,
items, sha256 (of the task file), evals: [{step, tokens, loss, accuracy}, ...]}}, which
`chinchax fit-tasks WORKDIR` reads (scaling/tasks/table.py). A resumed run reads its earlier
evaluations back from metrics.jsonl, so its record is that of a run never stopped.
"""

import dataclasses
import math

import jax
import numpy as np

from chinchax.scaling.runs import records
from chinchax.sweeps.data import choices
from chinchax.sweeps.data import multihost
from chinchax.sweeps.train import hooks as hooks_lib

LOSS_UNIT = "bpb"


@dataclasses.dataclass(frozen=True, eq=False)
class Prepared:
  """A run's tasks encoded for its tokenizer and context, before anything compiles: each
  task's rows, and all of them stacked into `inputs` and `targets`, padded with rows that count
  nothing to a multiple of `batch`."""

  rows: tuple[choices.Rows, ...]
  inputs: np.ndarray
  targets: np.ndarray
  batch: int


def stack(rows: tuple[choices.Rows, ...], batch: int, pad_id: int) -> Prepared:
  R = sum(r.n_rows for r in rows)
  L = rows[0].inputs.shape[1] if rows else 0
  pad = -R % batch
  inputs = np.concatenate([r.inputs for r in rows] + [np.full((pad, L), pad_id, np.int32)])
  targets = np.concatenate([r.targets for r in rows]
                           + [np.full((pad, L), choices.IGNORE, np.int32)])
  return Prepared(rows, inputs, targets, batch)


def prepare(c, tokenizer) -> Prepared:
  """Reads and encodes `c.tasks` (a choice longer than `c.seq_len` is refused here)."""
  rows = tuple(choices.encode(t, tokenizer, c.seq_len) for t in choices.read_all(tuple(c.tasks)))
  if not rows:
    return Prepared((), np.zeros((0, c.seq_len), np.int32), np.zeros((0, c.seq_len), np.int32),
                    c.batch_size)
  return stack(rows, c.batch_size, tokenizer.pad_id)


def log_likelihoods(eval_step, params, prepared: Prepared, batch_sharding) -> list[np.ndarray]:
  """Each task's rows' log-likelihoods (float64), the batches dispatched before any is read."""
  B, L = prepared.batch, prepared.inputs.shape[1]
  local = multihost.local_rows(batch_sharding, (B, L))  # this process's share of a batch
  out = []
  for start in range(0, prepared.inputs.shape[0], B):
    batch = {k: jax.make_array_from_process_local_data(
        batch_sharding, getattr(prepared, k)[start + local], (B, L))
        for k in ("inputs", "targets")}
    out.append(eval_step(params, batch)["row_loss_sums"])
  loglik = -np.concatenate([np.asarray(x, np.float64) for x in out])
  ends = np.cumsum([r.n_rows for r in prepared.rows])
  return np.split(loglik[:ends[-1]], ends[:-1]) if len(ends) else []


def summary(rows: choices.Rows, loglik: np.ndarray) -> tuple[float, float]:
  """(bits per byte of the correct choices, length-normalised accuracy) from each row's
  log-likelihood."""
  task = rows.task
  per_byte = loglik / rows.n_bytes
  correct_nats, correct_bytes, right = 0.0, 0, 0
  for i, answer in enumerate(task.answers):
    idx = np.flatnonzero(rows.item == i)
    correct_nats -= loglik[idx[answer]]
    correct_bytes += int(rows.n_bytes[idx[answer]])
    right += int(np.argmax(per_byte[idx]) == answer)
  return correct_nats / (math.log(2) * correct_bytes), right / len(task.answers)


class Tasks(hooks_lib.Hook):
  """Scores the run's tasks after each evaluation and the final one (see the docstring)."""

  def __init__(self, prepared: Prepared, model, writer, clock,
               tokens_per_step: int, logged: list[dict]):
    self.prepared, self.rows, self.writer, self.clock = prepared, prepared.rows, writer, clock
    self.tokens_per_step, self.batch_sharding = tokens_per_step, model.batch_sharding
    self.eval_step = model.eval_step
    names = {r.task.name for r in self.rows}
    self.evals = {n: [] for n in names}  # the evaluations so far, from metrics.jsonl on resume
    for row in logged:
      for n, v in (row.get("tasks") or {}).items():
        if n in names and isinstance(v, dict):
          self.evals[n].append({"step": row["step"], "tokens": row.get("tokens"), **v})

  def _evaluate(self, step: int, params) -> None:
    with self.clock("eval"):
      out = {}
      lls = log_likelihoods(self.eval_step, params, self.prepared, self.batch_sharding)
      for rows, loglik in zip(self.rows, lls):
        loss, accuracy = summary(rows, loglik)
        out[rows.task.name] = {"loss": loss, "accuracy": accuracy}
      tokens = step * self.tokens_per_step
      self.writer.write(step, tokens=tokens, tasks=out)
    for n, v in out.items():
      self.evals[n] = [e for e in self.evals[n] if e["step"] != step] + [
          {"step": step, "tokens": tokens, **v}]

  def after_eval(self, step: int, state, losses) -> None:
    self._evaluate(step, state["params"])

  def after_final_eval(self, step: int, state, losses) -> None:
    self._evaluate(step, state["params"])

  def record_fields(self, step: int) -> dict:
    out = {}
    for rows in self.rows:
      evals = self.evals[rows.task.name]
      if evals:
        t = rows.task
        out[t.name] = {"loss": evals[-1]["loss"], "accuracy": evals[-1]["accuracy"],
                       "loss_unit": LOSS_UNIT, "chance": t.chance, "items": len(t.answers),
                       "sha256": t.sha256, "evals": evals}
    return {"tasks": out} if out else {}


def hooks(prepared: Prepared, model, writer, clock, tokens_per_step: int) -> tuple:
  """The Tasks hook when the run has tasks, else none. Built after the metrics writer cut
  metrics.jsonl back to the restored step, so the evaluations it reads back are the run's."""
  if not prepared.rows:
    return ()
  return (Tasks(prepared, model, writer, clock, tokens_per_step,
                records.read_metrics(writer.path)),)
