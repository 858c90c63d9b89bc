"""argparse pieces shared by the subcommands that take plain flags (data, fit, fit-hparams,
forecast, law, plan): the parser whose mistakes are one UserError line, and the flag types."""

import argparse

from chinchax.errors import UserError


class Parser(argparse.ArgumentParser):
  """argparse that reports a bad flag as one UserError line instead of usage + exit."""

  def error(self, message: str):
    raise UserError(f"{message} (see {self.prog} --help)")


def count(text: str) -> int:
  """A whole number >= 0 (e.g. --bootstrap)."""
  try:
    n = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
  if n < 0:
    raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
  return n


def interval_level(text: str) -> float:
  """An interval level for --ci: a number strictly between 0 and 1."""
  try:
    x = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 0.9)") from None
  if not 0 < x < 1:
    raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {text!r}")
  return x
