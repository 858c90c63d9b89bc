"""Multiple-choice tasks scored at every evaluation of a run (`config.tasks`).

Per (item, choice) row (sweeps/data/choices.py) the log-likelihood of the choice given the
context, summed over its tokens, from one jitted step on the eval step's shardings (the
parameters as the train state holds them, rows split over the batch axes). Then per task:

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
import functools
import math

import flax.linen as nn
import jax
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from chinchax.models import decoder, sharding
from chinchax.models.config import ModelConfig
from chinchax.scaling.runs import records
from chinchax.sweeps.data import choices
from chinchax.sweeps.data import multihost
from chinchax.sweeps.train import hooks as hooks_lib
from chinchax.sweeps.train import step as step_lib

LOSS_UNIT = "bpb"


def make_score_step(cfg: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
                    rules=sharding.RULES, mode: str = "fsdp"):
  """jit(params, {"inputs", "targets", "mask"}) -> B float32: each row's summed log-likelihood
  of its masked targets, replicated (a few floats gathered)."""
  return _score_step(cfg, optimizer, mesh, step_lib._hashable(rules), mode)


@functools.lru_cache(maxsize=16)
def _score_step(cfg: ModelConfig, optimizer, mesh: Mesh, rules, mode: str):
  _, shard = step_lib.state_shardings(cfg, optimizer, mesh, rules, mode)

  def score(params, batch):
    with jax.sharding.use_abstract_mesh(mesh.abstract_mesh), nn.logical_axis_rules(rules):
      logits_BxLxV = decoder.Decoder(cfg).apply({"params": params}, batch["inputs"])
    ce_BxL = optax.softmax_cross_entropy_with_integer_labels(logits_BxLxV, batch["targets"])
    return -(ce_BxL * batch["mask"]).sum(axis=-1)

  return jax.jit(score, in_shardings=(shard["params"], sharding.batch_sharding(mesh, rules)),
                 out_shardings=NamedSharding(mesh, PartitionSpec()))


def log_likelihoods(score_step, params, rows: choices.Rows, batch_sharding) -> np.ndarray:
  """Each real row's log-likelihood (float64), the batches dispatched before any is read."""
  B, L = rows.batch, rows.inputs.shape[1]
  local = multihost.local_rows(batch_sharding, (B, L))  # this process's share of a batch
  out = []
  for start in range(0, rows.inputs.shape[0], B):
    batch = {k: jax.make_array_from_process_local_data(
        batch_sharding, getattr(rows, k)[start + local], (B, L))
        for k in ("inputs", "targets", "mask")}
    out.append(score_step(params, batch))
  return np.concatenate([np.asarray(x, np.float64) for x in out])[:rows.n_rows]


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


@dataclasses.dataclass(frozen=True)
class Prepared:
  """A run's tasks encoded for its tokenizer and context, before anything compiles."""

  rows: tuple[choices.Rows, ...]


def prepare(c, tokenizer) -> Prepared:
  """Reads and encodes `c.tasks` (a choice longer than `c.seq_len` is refused here)."""
  return Prepared(tuple(choices.encode(t, tokenizer, c.seq_len, c.batch_size)
                        for t in choices.read_all(tuple(c.tasks))))


class Tasks(hooks_lib.Hook):
  """Scores the run's tasks after each evaluation and the final one (see the docstring)."""

  def __init__(self, prepared: Prepared, model, mode: str, writer, clock,
               tokens_per_step: int, logged: list[dict]):
    self.rows, self.writer, self.clock = prepared.rows, writer, clock
    self.tokens_per_step, self.batch_sharding = tokens_per_step, model.batch_sharding
    self.score_step = make_score_step(model.cfg, model.tx, model.mesh, sharding.RULES, mode)
    names = {r.task.name for r in self.rows}
    self.evals = {n: [] for n in names}  # the evaluations so far, from metrics.jsonl on resume
    for row in logged:
      for n, v in (row.get("tasks") or {}).items():
        if n in names and isinstance(v, dict):
          self.evals[n].append({"step": row["step"], "tokens": row.get("tokens"), **v})

  def _evaluate(self, step: int, params) -> None:
    with self.clock("eval"):
      out = {}
      for rows in self.rows:
        loglik = log_likelihoods(self.score_step, params, rows, self.batch_sharding)
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


def hooks(prepared: Prepared, model, mode: str, writer, clock, tokens_per_step: int) -> tuple:
  """The Tasks hook when the run has tasks, else none. Built after the metrics writer cut
  metrics.jsonl back to the restored step, so the evaluations it reads back are the run's."""
  if not prepared.rows:
    return ()
  return (Tasks(prepared, model, mode, writer, clock, tokens_per_step,
                records.read_metrics(writer.path)),)
