"""The sweep's one call of the fit: `fit_workdir(workdir, bootstrap)`.

It does what `chinchax fit WORKDIR --out=WORKDIR/law.json --plots=WORKDIR/plots
--bootstrap=B` does, through the library (`chinchax.scaling.api.fit_detailed`), not the
command line, and prints the same summary.
"""

import os
import sys

from chinchax.scaling import api
from chinchax.scaling import fit_text


def fit_workdir(workdir: str, bootstrap: int) -> str:
  """Fits the runs of the sweep in `workdir`; writes law.json and plots/, prints the law.

  Returns the path of law.json; UserError when the runs give no law.
  """
  out, plots = os.path.join(workdir, "law.json"), os.path.join(workdir, "plots")
  log = lambda m: print(m, file=sys.stderr, flush=True)
  law, runs, written = api.fit_detailed(workdir, bootstrap=bootstrap, out=out, plots=plots,
                                        log=log)
  print(fit_text.summary(law, len(runs)))
  print("wrote " + ", ".join(written))
  return out
