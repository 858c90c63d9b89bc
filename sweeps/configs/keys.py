"""A config key declared once: its dotted name, its default, its one-line meaning and its
role in a workdir's identity side by side (`Key`). sweeps/configs/train.py declares a train
config's keys, sweeps/configs/sweep.py a sweep config's; `config` builds the ml_collections ConfigDict from them and `--help`
(chinchax/cli/flags.py) prints the meanings from the same declarations.
"""

import dataclasses
from typing import Any, Sequence

import ml_collections


# What a change of a key does to the runs already in a workdir (sweeps/configs/identity.py):
IDENTITY = "identity"  # changes what a run trains or how it is measured: a rerun may not
GRID = "grid"          # a sweep's set of cells: a rerun adds cells, the study is extended
FREE = "free"          # changes nothing a run measures (logging, checkpoints, where it runs)


@dataclasses.dataclass(frozen=True)
class Key:
  name: str      # dotted: "optimizer.peak_lr"
  default: Any
  meaning: str
  role: str = IDENTITY


def config(keys: Sequence[Key]) -> ml_collections.ConfigDict:
  """A ConfigDict holding every key at its default, nested by the dots of its name."""
  c = ml_collections.ConfigDict()
  for k in keys:
    *parents, leaf = k.name.split(".")
    node = c
    for p in parents:
      if p not in node:
        node[p] = ml_collections.ConfigDict()
      node = node[p]
    node[leaf] = k.default
  return c


def meanings(keys: Sequence[Key], prefix: str = "") -> dict[str, str]:
  return {prefix + k.name: k.meaning for k in keys}
