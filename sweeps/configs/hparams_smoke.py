r"""The hyperparameter smoke sweep: the optimal peak LR measured on a CPU and fitted to a law.

    chinchax sweep --config=hparams_smoke --workdir=runs/hparams_smoke [--dry-run]
    python bench/hparams_smoke_bench.py          # the same, timed, then the smoke's LR checked

The smoke sweep's models (sweeps/configs/smoke.py: byte-level, tied, context 64, WSD cooled to
zero) at two sizes of its ladder, 10.1k and 33.5k parameters, each at D = 8 and 24 tokens per
parameter: four (N, D) points that vary N and D independently, as the default law
η* = c·N^p·D^q needs. At each point an LR grid of 5 values a factor 2 apart around the smoke's
LR line (0.25x-4x) and a batch grid of 2, 4 and 8 sequences (the smoke's 8 and below). Each
(size, LR, batch) is one WSD run with a cooldown branch at each D (`fixed_n.schedule='wsd'`):
30 runs, 60 cells, two at a time (`executor='packed'`). The sweep ends with fit-hparams:
WORKDIR/hparams.json, plots/hparams_lr*.png, report.md.

The design, from a pilot of this grid with batches of 4, 8, 16 sequences (192 s of CPU):
every LR optimum was interior, but every batch optimum lay below the grid (at these sizes
training is limited by optimizer steps, so fewer tokens per step win); 2 sequences was added
below and 16 dropped (16 costs the least and told the least). Sizes: 10.1k and 33.5k are
3.3x apart, as far as the CPU budget goes; D: 8 and 24 tokens per parameter put the four
points' D over 10x (8.1e4-8.0e5).

What it gives (bench/hparams_smoke_bench.py; eval loss in nats per byte):

            N         D runs div   loss*       LR*      LR within 1% B* tokens     B within 1%  flags
       1.01e4    8.09e4   15   0  2.6519    0.0115    0.00581-0.0227      80.1          43-149  batch edge
       1.01e4    2.42e5   15   0  2.3374   0.00764     0.0047-0.0124      67.4        36.6-124  batch edge
       3.35e4    2.68e5   15   0  2.2036   0.00614      0.00376-0.01       168         102-275  batch edge
       3.35e4    8.04e5   15   0  1.8860   0.00623   0.00406-0.00957       281         191-414  interior

    LR law: eta* = c * N^p * D^q: c = 0.364 [0.0134, 42.2], N^-0.167 [-0.331, +0.012],
            D^-0.179 [-0.640, +0.096]  (90% intervals, 4 points)

An interior LR optimum at every point; the batch optimum is interior only at the largest D
(281 tokens), the others lie below 2 sequences (the LR there is read at the grid's smallest
batch), so no batch law: measuring it at these sizes needs batches of one sequence or larger
D, more than a 5-minute CPU budget holds. Four points for three parameters leave wide
intervals; the exponents' signs are what the points determine.

Time (bench/hparams_smoke_bench.py, the shared 2-core machine): 375 s of wall time and
197 s of CPU with the compile cache off (CHINCHAX_COMPILE_CACHE=off) at a load average of
8.5-14.6, and 571 s wall, 190 s CPU with a warm cache at 10-14; both runs gave the table
above to the last digit. The sweep got 0.33-0.52 of a core there, so its wall time followed
the other processes; what it needs is its CPU time over two cores (two cells at a time)
plus about 15 s of data opening, fit and plots: about 2 minutes on two idle cores, an
estimate from those figures, not a measurement.
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
