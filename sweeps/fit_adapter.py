"""The sweep's one call of the fit: `fit_workdir(workdir, bootstrap)`.

It does what `chinchax fit WORKDIR --out=WORKDIR/law.json --plots=WORKDIR/plots
--bootstrap=B` does, through the fit's functions (today in sweeps/cli/fit.py), not its
command line. When the fits become a library function of chinchax.scaling, this one function
is what calls it.
"""

import dataclasses
import os
import sys

from chinchax.scaling import law as law_lib
from chinchax.scaling import parametric
from chinchax.scaling import runs as runs_lib
from chinchax.scaling.errors import UserError
from chinchax.sweeps.cli import fit as cli_fit


@dataclasses.dataclass(frozen=True)
class _Settings:  # what cli_fit.fit_all reads of its flags
  bootstrap: int
  delta: float = parametric.DEFAULT_DELTA
  seed: int = 0


def fit_workdir(workdir: str, bootstrap: int) -> str:
  """Fits the runs of the sweep in `workdir`; writes law.json and plots/, prints the law.

  Returns the path of law.json; UserError when the runs give no law.
  """
  out, plots = os.path.join(workdir, "law.json"), os.path.join(workdir, "plots")
  log = lambda m: print(m, file=sys.stderr, flush=True)
  approaches, explicit = cli_fit.parse_approaches(None)
  runs = runs_lib.load_runs([workdir], params="total", flops="6ND", schedule="all")
  if runs.n_failed:
    log(f"skipped {runs.n_failed} failed runs")
  if len(runs) < 5:
    raise UserError(f"Approach 3 fits 5 parameters and needs at least 5 runs; got {len(runs)}")
  settings = _Settings(bootstrap)
  result = cli_fit.fit_all(runs, settings, approaches, explicit, log)
  fit3 = result["fit3"]
  law_dict = law_lib.build_law(
      E=fit3.E, A=fit3.A, B=fit3.B, alpha=fit3.alpha, beta=fit3.beta,
      objective=fit3.objective, n_starts=fit3.n_starts, n_at_best=fit3.n_at_best,
      n_points=fit3.n_points, fit_warnings=fit3.warnings, delta=fit3.delta,
      samples=result["samples"], seed=settings.seed if bootstrap else None,
      ci_level=cli_fit.CI_LEVEL, approaches=result["approaches"], params_convention="total",
      flops_convention="6ND", N=runs.N, D=runs.D, C=runs.C, inputs=[workdir])
  dropped = (law_dict.get("bootstrap") or {}).get("dropped", 0)
  if dropped:
    result["notes"].append(
        f"{dropped} of {bootstrap} bootstrap refits gave no law (alpha, beta, A or B not "
        "positive) and were dropped: the intervals are optimistic; fit more budgets or sizes")
  law_lib.save_law(out, law_dict)
  written = [out] + cli_fit.write_plots(runs, result, law_dict, plots)
  print(cli_fit.summary(law_lib.ScalingLaw.from_dict(law_dict), result, len(runs)))
  print("wrote " + ", ".join(written))
  return out
