"""Versions: chinchax's own (`chinchax.__version__`, which law.json, hparams.json and a run's
record name) and the installed libraries a record or a compile cache names."""


def of(dist: str) -> str | None:
  """The installed version of distribution `dist`; None when it is not installed."""
  # importlib.metadata is 30 ms of import: only the commands that record libraries pay it.
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  try:
    return metadata.version(dist)
  except metadata.PackageNotFoundError:
    return None


def chinchax() -> str:
  import chinchax as package  # pylint: disable=g-import-not-at-top  # its parent, imported
  return package.__version__
