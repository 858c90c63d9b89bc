"""chinchax: compute-optimal scaling studies in JAX/Flax.

The distribution installs one import name. Its folders in the checkout are
`scaling/` (chinchax.scaling), `models/` (chinchax.models), `sweeps/` (chinchax.sweeps) and
`launch/` (chinchax.launch); this file is the package root and the library API, which the
`chinchax` command calls (docs/DESIGN.md, "Library API"):

    result = chinchax.sweep(config, workdir)              # sweeps.sweep.Result: train, fit, report
    outcome = chinchax.train(config, workdir)             # sweeps.job.Outcome: one run (or WSD run)
    law = chinchax.fit("runs/smoke", bootstrap=1000, ci=0.9)   # scaling.api.fit
    plan = chinchax.plan(law, flops=1e21)                      # scaling.api.plan
    law = chinchax.law_from_coefficients(1.87, 521, 1488, 0.353, 0.353)  # a paper's law
    laws = chinchax.fit_tasks("ladder.csv", out="tasks.json")  # scaling.tasks.fit: accuracy

They are imported on first use, so `import chinchax` (and `chinchax plan`) loads no jax.
"""

import os as _os

# In a checkout the subpackages are this folder's siblings. An installed wheel holds them
# inside the package and the editable install maps them, so this only serves a checkout on
# PYTHONPATH without an install (subprocess tests, Ray workers, a device machine).
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "pyproject.toml")) and _os.path.isdir(
    _os.path.join(_root, "scaling")):
  __path__.append(_root)  # type: ignore[name-defined]  # pylint: disable=undefined-variable


# The distribution's version (pyproject.toml reads it here): law.json and every record name it,
# and importlib.metadata, which would look it up, is 30 ms of every command's start.
__version__ = "0.1.0"



# name -> (module, attribute): the library API, imported on first use.
_API = {
    "sweep": ("chinchax.sweeps.sweep", "sweep"),
    "train": ("chinchax.sweeps.job", "train"),
    "fit": ("chinchax.scaling.api", "fit"),
    "plan": ("chinchax.scaling.api", "plan"),
    "fit_tasks": ("chinchax.scaling.tasks.fit", "fit_tasks"),
    "law_from_coefficients": ("chinchax.scaling.law.coefficients", "law_from_coefficients"),
}


def __getattr__(name: str):
  if name in _API:
    import importlib  # pylint: disable=g-import-not-at-top
    module, attribute = _API[name]
    return getattr(importlib.import_module(module), attribute)
  raise AttributeError(f"module 'chinchax' has no attribute {name!r}")


def __dir__():
  return sorted(list(globals()) + list(_API))
