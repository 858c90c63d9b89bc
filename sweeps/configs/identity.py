"""A workdir holds one study: what a rerun into it may change.

The first `chinchax sweep` into a workdir records its config (WORKDIR/sweep.json), and the
first `chinchax train` into a run folder its own (RUN/config.json). A rerun compares its config
with the recorded one key by key, each key by its role, declared beside it (`keys.Key.role`,
sweeps/configs/train.py and sweep.py):

* an identity key (the model family and shape recipe, the data and tokenizer, the optimizer
  and schedule, the recipe's rules, the seed, the evaluation data, ...) changes what a run
  trains or how it is measured: a change is refused in one line naming each key with both
  values, and nothing is written;
* a grid key (a sweep's budgets and sizes) chooses the cells: a change adds cells to the
  study, which the sweep says in one line;
* a free key (logging, checkpoint cadence, the mesh, where cells run) changes nothing a run
  measures: allowed, and recorded in the rewritten file.

A key the recorded file lacks (written by an older chinchax) counts as its default; a key
not declared counts as identity. A workdir whose runs are there but whose recorded config is
missing or does not parse is a damaged one: refused, since what its runs were trained with
cannot be known."""

import json
from collections.abc import Iterable, Mapping
from typing import Any

from chinchax import atomic
from chinchax.errors import UserError
from chinchax.scaling.numerics import fmt
from chinchax.sweeps.configs import keys


def flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
  """{"a.b": value} of a nested mapping; lists and tuples are values (JSON's lists)."""
  out = {}
  for k, v in tree.items():
    if isinstance(v, Mapping):
      out.update(flatten(v, f"{prefix}{k}."))
    else:
      out[f"{prefix}{k}"] = json.loads(json.dumps(v, default=str))
  return out


def declared(key_sets: Iterable[tuple[str, Iterable[keys.Key]]]) -> dict[str, keys.Key]:
  """Every declared key by its dotted name, each set under its prefix ("" or "train.")."""
  return {prefix + k.name: k for prefix, ks in key_sets for k in ks}


def changes(old: Mapping, new: Mapping, known: Mapping[str, keys.Key]
            ) -> dict[str, list[tuple[str, Any, Any]]]:
  """{role: [(key, old value, new value)]} between two flattened configs."""
  out: dict[str, list] = {keys.IDENTITY: [], keys.GRID: [], keys.FREE: []}
  for name in sorted(new):
    k = known.get(name)
    default = json.loads(json.dumps(k.default, default=str)) if k else None
    before = old.get(name, default)
    if before != new[name]:
      out[k.role if k else keys.IDENTITY].append((name, before, new[name]))
  return out


def _text(v: Any) -> str:
  if isinstance(v, float):
    return fmt.exact(v)  # two values that differ never read alike
  if isinstance(v, list):
    return "[" + ", ".join(_text(x) for x in v) + "]"
  return json.dumps(v)


def _shown(v: Any) -> str:
  text = _text(v)
  return text if len(text) <= 60 else text[:57] + "..."


def said(items: list[tuple[str, Any, Any]]) -> str:
  """`key old -> new, ...`: every changed key, so that the line says all that differs."""
  return ", ".join(f"{name} {_shown(a)} -> {_shown(b)}" for name, a, b in items)


def recorded(path: str, what: str, runs_there: bool) -> dict | None:
  """The flattened config recorded at `path`; None if there is none and no runs either."""
  text = atomic.read_text(path)
  if text is None:
    if runs_there:
      raise UserError(f"{path} is missing but {what} holds runs: what they were trained with "
                      "is unknown, so none can be resumed or added to; pass another --workdir "
                      "(or restore the file)")
    return None
  try:
    doc = json.loads(text)
  except ValueError as e:
    raise UserError(f"{path} does not parse ({e}): what the runs of {what} were trained with "
                    "is unknown; pass another --workdir (or restore the file)") from None
  if not isinstance(doc, dict):
    raise UserError(f"{path} is not a config (a JSON object); pass another --workdir")
  return flatten(doc)
