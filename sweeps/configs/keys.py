"""A config key declared once: its dotted name, its default and its one-line meaning side by
side (`Key`). sweeps/configs/train.py declares a train config's keys, sweeps/configs/sweep.py a
sweep config's; `config` builds the ml_collections ConfigDict from them and `--help`
(chinchax/cli/flags.py) prints the meanings from the same declarations.
"""

import dataclasses
from typing import Any, Sequence

import ml_collections


@dataclasses.dataclass(frozen=True)
class Key:
  name: str      # dotted: "optimizer.peak_lr"
  default: Any
  meaning: str


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
