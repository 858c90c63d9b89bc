r"""The hyperparameter smoke sweep: peak LR and batch measured on a CPU, fitted to laws.

    chinchax sweep --config=hparams_smoke --workdir=runs/hparams_smoke [--dry-run]

PILOT: filled in below from bench/hparams_smoke_bench.py.
"""

import ml_collections

from chinchax.sweeps.configs import smoke

SIZES = (smoke.LADDER[0], smoke.LADDER[2])    # 10.1k and 33.5k parameters
TOKENS_PER_PARAM = (8, 24)                    # two cooldown branches per WSD run
LR_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)       # around the smoke sweep's LR line
BATCH_FACTORS = (0.25, 0.5, 1.0)              # 2, 4, 8 sequences of 64 bytes


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg  # no presets
  c = smoke.get_config()
  c.name = "hparams_smoke"
  c.budgets, c.sizes = (), ()
  c.fixed_n.update(sizes=SIZES, tokens_per_param=TOKENS_PER_PARAM, schedule="wsd")
  c.hparams.lr_factors = LR_FACTORS
  c.hparams.batch_factors = BATCH_FACTORS
  c.min_steps = 40
  return c
