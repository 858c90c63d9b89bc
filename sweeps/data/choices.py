"""Multiple-choice tasks: a JSONL file of items read and checked, then encoded into the
rows the run's eval step scores (sweeps/train/tasks.py).

One item a line: {"context": str, "choices": [str, str, ...], "answer": INDEX} (the index of
the correct choice, from 0). Every bad line is one `UserError` naming the file and line. A task
is named by its file's stem, or is a built-in (`BUILTIN`): `stdlib_next_line`, 48 items built
by `next_line_items` from held-out files of the Python standard library (the smoke corpus's
validation split): given the preceding lines, which of four lines of the same file comes next.
It ships with chinchax, so a task runs with no download.

Each (item, choice) pair is one row: the context's tokens, then the choice's, cut to the
model's `seq_len` + 1 from the left (the context gives way, never the choice), as inputs (all
but the last token) and targets (all but the first), padded to `seq_len`: the eval batch's
shape. A target that is not the choice's is `IGNORE` (negative), which the eval step does not
count, so the run's eval step scores the rows. Context and choice are tokenised apart, so each
choice is scored on its own tokens (for bytes the same as tokenising them together). An empty
context reads as the end of a document, as after an EOD in the training stream.
"""

import dataclasses
import functools
import hashlib
import json
import os
import random

import numpy as np

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.sweeps.data import text_builder

_HERE = os.path.dirname(os.path.abspath(__file__))
BUILTIN = {"stdlib_next_line": os.path.join(_HERE, "tasks", "stdlib_next_line.jsonl")}
FORMAT = '{"context": "...", "choices": ["...", "..."], "answer": INDEX}'


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
  name: str
  path: str
  contexts: tuple[str, ...]
  choices: tuple[tuple[str, ...], ...]
  answers: np.ndarray   # int, one per item
  sha256: str           # of the file's bytes: runs scored on other items do not mix

  @property
  def chance(self) -> float:
    """Accuracy by guessing: the mean of 1 / (choices) over the items."""
    return float(np.mean([1.0 / len(c) for c in self.choices]))


def path_of(spec: str) -> str:
  """The file a task entry names: a built-in's, else the path as given."""
  if spec in BUILTIN:
    return BUILTIN[spec]
  if not spec.endswith(".jsonl") or not atomic.exists(spec):
    raise UserError(f"task {spec!r} is neither a built-in ({', '.join(BUILTIN)}) nor an "
                    f"existing .jsonl file of items {FORMAT}")
  return spec


def name_of(spec: str) -> str:
  return spec if spec in BUILTIN else os.path.basename(spec)[:-len(".jsonl")]


def _item(where: str, line: str) -> tuple[str, tuple[str, ...], int]:
  try:
    obj = json.loads(line)
  except json.JSONDecodeError as e:
    raise UserError(f"{where}: not valid JSON ({e.msg}); each line is {FORMAT}") from None
  if not isinstance(obj, dict):
    raise UserError(f"{where}: expected a JSON object {FORMAT}")
  for key in ("context", "choices", "answer"):
    if key not in obj:
      raise UserError(f"{where}: no {key}; each line is {FORMAT}")
  context, choices, answer = obj["context"], obj["choices"], obj["answer"]
  if not isinstance(context, str):
    raise UserError(f"{where}: context must be a string, got {type(context).__name__}")
  if not isinstance(choices, list) or not choices:
    raise UserError(f"{where}: choices is empty or not a list; give at least two strings")
  if len(choices) < 2:
    raise UserError(f"{where}: one choice leaves nothing to choose; give at least two")
  for j, c in enumerate(choices):
    if not isinstance(c, str) or not c:
      raise UserError(f"{where}: choice {j} is {'empty' if c == '' else repr(c)}; every "
                      "choice is a non-empty string (the continuation scored)")
  if isinstance(answer, bool) or not isinstance(answer, int):
    raise UserError(f"{where}: answer must be the index of the correct choice (an integer "
                    f"from 0), got {answer!r}")
  if not 0 <= answer < len(choices):
    raise UserError(f"{where}: answer {answer} is outside the {len(choices)} choices "
                    f"(0..{len(choices) - 1}; answers count from 0)")
  return context, tuple(choices), answer


@functools.lru_cache(maxsize=32)
def _read(path: str, stamp) -> Task:
  del stamp  # the cache key: a file changed on disk is read again
  raw = atomic.read_bytes(path)
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
  items = [_item(f"{path}:{i}", line) for i, line in enumerate(text.splitlines(), 1)
           if line.strip()]
  if not items:
    raise UserError(f"{path}: no items; each line is {FORMAT}")
  contexts, choices, answers = zip(*items)
  return Task("", path, contexts, choices, np.array(answers, np.int64),
              hashlib.sha256(raw).hexdigest())


def read(spec: str) -> Task:
  """The task an entry of `tasks` names (a built-in or a .jsonl path), every item checked."""
  path = path_of(spec)
  try:
    st = os.stat(path)
    stamp = (st.st_mtime_ns, st.st_size)
  except OSError:  # an object store: read each time
    stamp = object()
  return dataclasses.replace(_read(path, stamp), name=name_of(spec))


def read_all(specs) -> tuple[Task, ...]:
  """Every task of a config's `tasks`, refused in one line when one is bad or two share a name."""
  if isinstance(specs, str) or not all(isinstance(s, str) and s for s in specs):
    raise UserError(f"config.tasks must be a list of task names or .jsonl paths, got {specs!r}")
  tasks = tuple(read(s) for s in specs)
  names = [t.name for t in tasks]
  twice = sorted({n for n in names if names.count(n) > 1})
  if twice:
    raise UserError(f"config.tasks names {', '.join(twice)} twice; give each task once (a "
                    "task is named by its file's stem)")
  return tasks


IGNORE = -1  # a target the eval step does not count (sweeps/train/step.py)


@dataclasses.dataclass(frozen=True, eq=False)
class Rows:
  """A task encoded: `inputs` and `targets` (int32), R x seq_len, one row per (item, choice),
  item-major; the targets that are not the choice's are `IGNORE`."""

  task: Task
  inputs: np.ndarray
  targets: np.ndarray
  item: np.ndarray     # R: each row's item
  n_bytes: np.ndarray  # R: UTF-8 bytes of each row's choice

  @property
  def n_rows(self) -> int:
    return len(self.item)


def encode(task: Task, tokenizer, seq_len: int) -> Rows:
  """The task's rows for a model of context `seq_len`; a choice longer than it is refused."""
  R = sum(len(c) for c in task.choices)
  inputs = np.full((R, seq_len), tokenizer.pad_id, np.int32)
  targets = np.full((R, seq_len), IGNORE, np.int32)
  item, n_bytes, r = [], [], 0
  for i, (context, choices) in enumerate(zip(task.contexts, task.choices)):
    ctx = np.asarray(tokenizer.encode(context), np.int32)
    if not len(ctx):
      ctx = np.array([tokenizer.eod_id], np.int32)
    for j, choice in enumerate(choices):
      cont = np.asarray(tokenizer.encode(choice), np.int32)
      if len(cont) > seq_len:
        raise UserError(f"task {task.name}: item {i + 1}'s choice {j} is {len(cont)} tokens, "
                        f"more than the model's seq_len {seq_len}; shorten it or drop the task")
      s = np.concatenate([ctx[-(seq_len + 1 - len(cont)):], cont])
      inputs[r, :len(s) - 1] = s[:-1]
      targets[r, len(s) - 1 - len(cont):len(s) - 1] = cont
      item.append(i)
      n_bytes.append(len(choice.encode("utf-8")))
      r += 1
  return Rows(task, inputs, targets, np.array(item), np.array(n_bytes, np.int64))


def next_line_items(n_items: int = 48, seed: int = 0, corpus: str = text_builder.STDLIB,
                    val_fraction: float = 0.05, min_len: int = 8, max_len: int = 24,
                    context_bytes: int = 200, per_file: int = 2) -> list[dict]:
  """Items of `stdlib_next_line`: `per_file` from each held-out file of `corpus` (the files its
  validation split holds, so no run trained on them), `n_items` of them drawn: a line of
  `min_len`..`max_len` bytes with at least three lines before it, its preceding `context_bytes` as context (from
  a line start), and three other distinct lines of the same length range from the same file.
  Short lines so that the choice fits even the tiny preset's 32-token context."""
  c = text_builder.find_corpus(corpus)
  rng = random.Random(seed)
  items = []
  for f in c.files:
    content = open(f, "rb").read()
    rel = os.path.relpath(f, c.root)
    if not text_builder.is_validation(rel, content, val_fraction):
      continue
    try:
      lines = content.decode("utf-8").splitlines()
    except UnicodeDecodeError:
      continue
    ok = [k for k, l in enumerate(lines)
          if min_len <= len(l.encode("utf-8")) <= max_len and len(l.strip()) >= 6]
    pool = sorted({lines[k] for k in ok})
    targets = [k for k in ok if k >= 3]
    if len(pool) < 4 or not targets:
      continue
    for k in sorted(rng.sample(targets, min(per_file, len(targets)))):
      others = rng.sample([l for l in pool if l.strip() != lines[k].strip()], 3)
      before = "\n".join(lines[:k]) + "\n"
      start = before.rfind("\n", 0, max(0, len(before) - context_bytes)) + 1
      answer = rng.randrange(4)
      choices = others[:answer] + [lines[k]] + others[answer:]
      items.append({"context": before[start:], "choices": choices, "answer": answer,
                    "source": f"{rel}:{k + 1}"})
  rng.shuffle(items)
  return sorted(items[:n_items], key=lambda x: x["source"])
