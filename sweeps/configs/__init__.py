"""The configs that ship with chinchax, by name: `--config=smoke|tiny|train|gpu_node|tpu_v5p`.

`resolve("NAME[:ARG]")` or `resolve("PATH[:ARG]")` gives the file to load, from any folder:
the installed package holds these files (pyproject's package-data), so a name, or a README
path such as `sweeps/configs/gpu_node.py` typed outside the checkout, finds them.
"""

import ast
import os

from chinchax.errors import UserError

DIR = os.path.dirname(os.path.abspath(__file__))
NAMES = ("smoke", "tiny", "train", "gpu_node", "tpu_v5p", "hparams_smoke", "smoke_adaptive")


def path(name: str) -> str:
  return os.path.join(DIR, f"{name}.py")


def summary(file: str) -> str:
  """The first line of a config file's docstring (read, not imported)."""
  with open(file, encoding="utf-8") as f:
    doc = ast.get_docstring(ast.parse(f.read())) or ""
  return doc.strip().splitlines()[0] if doc.strip() else ""


def listing() -> str:
  """One line per named config: its name and what it is."""
  width = max(map(len, NAMES))
  return "\n".join(f"  {n:<{width}}  {summary(path(n))}" for n in NAMES)


def resolve(text: str) -> str:
  """NAME[:ARG] or PATH[:ARG] -> an existing file's absolute path[:ARG], or a UserError."""
  file, sep, arg = text.partition(":")
  stem = os.path.basename(file)[:-3] if file.endswith(".py") else file
  if os.path.isfile(os.path.expanduser(file)):
    found = os.path.abspath(os.path.expanduser(file))
  elif stem in NAMES and (file == stem or file.replace(os.sep, "/").endswith(
      f"sweeps/configs/{stem}.py") or file == f"{stem}.py"):
    found = path(stem)  # a name, or the checkout path a README shows, from any folder
  else:
    raise UserError(f"--config={text}: no such file, and not a named config "
                    f"({', '.join(NAMES)}); `chinchax sweep --list-configs` lists them")
  return found + sep + arg


def default_workdir(config_text: str) -> str:
  """runs/<the config's name>: `smoke` -> runs/smoke, `path/to/mine.py:big` -> runs/mine-big,
  so that two studies never share a workdir by default."""
  file, _, arg = config_text.partition(":")
  stem = os.path.basename(file)
  stem = stem[:-3] if stem.endswith(".py") else stem
  return os.path.join("runs", stem + (f"-{arg}" if arg else ""))
