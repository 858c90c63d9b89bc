"""argparse types shared by the subcommands that take plain flags (fit, plan)."""

import argparse


def interval_level(text: str) -> float:
  """An interval level for --ci: a number strictly between 0 and 1."""
  try:
    x = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 0.9)") from None
  if not 0 < x < 1:
    raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {text!r}")
  return x
