"""The configs' docstrings show what their dry runs print: every sample line of the grid
(header, rule, the rows shown, the totals, the time and the fit's sizes per budget) is a
prefix of the line the dry run prints today (a sample cut short ends in `...`)."""

import importlib
import re

import pytest

from chinchax import cli

CONFIGS = ("tiny", "smoke", "gpu_node", "tpu_v5p")
_SAMPLE = re.compile(r"^(cell |-{5}|C[\d.e]+-N|\d+ cells, |time |sizes per budget|C=)")


def _norm(line: str) -> str:
  return " ".join(line.split())


def _samples(doc: str) -> list[str]:
  """The indented lines of the docstring's dry-run sample, up to any --compile sample."""
  out = []
  for line in doc.splitlines():
    if "--compile" in line:
      break
    text = line.strip()
    if line.startswith("    ") and _SAMPLE.match(text):
      out.append(_norm(text.removesuffix("...")))
  return out


@pytest.mark.parametrize("name", CONFIGS)
def test_the_docstring_sample_matches_the_dry_run(name, capsys):
  doc = importlib.import_module(f"chinchax.sweeps.configs.{name}").__doc__
  samples = _samples(doc)
  assert len(samples) >= 4, samples  # a header, a rule or rows, and the totals at least
  assert cli.run(["sweep", f"--config={name}", "--dry-run"]) == 0
  printed = [_norm(l) for l in capsys.readouterr().out.splitlines()]
  for sample in samples:
    assert any(l.startswith(sample) for l in printed), (
        f"{name}.py shows a line the dry run no longer prints:\n  {sample}\nclosest: "
        + next((l for l in printed if l.split()[:1] == sample.split()[:1]), "(none)"))
