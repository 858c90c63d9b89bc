"""Installed versions: the one lookup behind chinchax's own (law.json, hparams.json, a run's
record) and the libraries a record or a compile cache names."""

from importlib import metadata


def of(dist: str) -> str | None:
  """The installed version of distribution `dist`; None when it is not installed."""
  try:
    return metadata.version(dist)
  except metadata.PackageNotFoundError:
    return None


def chinchax() -> str:
  return of("chinchax") or "unknown"
