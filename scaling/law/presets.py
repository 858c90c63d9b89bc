"""Published Approach-3 laws, usable wherever a law.json is (`chinchax plan --preset=NAME`).

Both are fits of L(N, D) = E + A/N^alpha + B/D^beta to the Chinchilla runs (N total
parameters, C = 6ND, loss in nats/token on MassiveText). Neither publishes bootstrap samples,
so a preset has no interval (`ci` and `bootstrap` are null).

* `hoffmann2022`: Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models",
  App. D.2 (eq. 10): E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28.
* `besiroglu2024`: Besiroglu et al. 2024, "Chinchilla Scaling: A replication attempt"
  (Epoch AI), refit on data reconstructed from the paper's Fig. 4:
  E=1.8172, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658.

Fitted range: the Chinchilla runs span about 7e7–1.6e10 parameters, 5e9–5e11 tokens and
budgets of about 1e18–1e22 FLOPs; extrapolation warnings are measured from that range.
"""

from typing import Any

from chinchax.scaling.law import artifact as law_lib
from chinchax.errors import UserError

_CHINCHILLA_DATA = {"N": [7e7, 1.6e10], "D": [5e9, 5e11], "C": [1e18, 1e22]}

PRESETS: dict[str, dict[str, Any]] = {
    "hoffmann2022": {
        "params": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
        "reference": "Hoffmann et al. 2022, Training Compute-Optimal Large Language "
                     "Models, App. D.2",
        # Why `plan --preset=hoffmann2022 --flops=5.76e23` is not Chinchilla itself.
        "plan_note": "this is the paper's Approach 3 law (eq. 10): at Chinchilla's 5.76e23 "
                     "FLOPs it gives ~32B parameters and ~3T tokens, not Chinchilla's 70B and "
                     "1.4T, which the paper took from its Approaches 1 and 2; Besiroglu et al. "
                     "2024's refit of Approach 3 (--preset=besiroglu2024) gives ~72B and 1.3T",
    },
    "besiroglu2024": {
        "params": {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
        "reference": "Besiroglu et al. 2024, Chinchilla Scaling: A replication attempt "
                     "(Epoch AI)",
    },
}


def names() -> list[str]:
  return sorted(PRESETS)


def preset_dict(name: str) -> dict[str, Any]:
  """The law.json dict of a preset."""
  if name not in PRESETS:
    raise UserError(f"unknown preset {name!r}; choose one of: {', '.join(names())}")
  spec = PRESETS[name]
  law = law_lib.build_law(
      **spec["params"],
      delta=1e-3,  # both papers fit a Huber loss with delta = 1e-3 on log-loss residuals
      N=_CHINCHILLA_DATA["N"], D=_CHINCHILLA_DATA["D"], C=_CHINCHILLA_DATA["C"],
      recommended={"approach": "3", "why": f"the published law of {spec['reference']}"},
      notes=["a published law: no bootstrap draws, so no intervals"],
      extra={"reference": spec["reference"], "preset": name,
             **({"plan_note": spec["plan_note"]} if spec.get("plan_note") else {})},
  )
  law["data"]["points"] = None  # the ranges above are the paper's, not points we hold
  law["fit"]["points"] = None
  return law_lib.validate_law(law)


def preset(name: str) -> law_lib.ScalingLaw:
  return law_lib.ScalingLaw.from_dict(preset_dict(name), source=f"preset {name}")
