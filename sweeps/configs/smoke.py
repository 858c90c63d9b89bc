r"""The built-in smoke sweep: an IsoFLOP study on a CPU, 6 budgets over 30x, by WSD branches.

    chinchax sweep                       # = --config=sweeps/configs/smoke.py --workdir=runs/smoke
    chinchax sweep --config=sweeps/configs/smoke.py --dry-run

The dry run prints the grid (one row per IsoFLOP cell; its time column prices each cell as a
cosine run of its own), then what the WSD runs train instead, and exits:

    cell                  C        N  d_model x L  heads  d_ff       D    D/N  steps   batch  peak LR ...
    C5e10-N1.01e4      5e10   10,096       16 x 2      2    40  8.25e5   81.7   1612  8 x 64   0.0172 ...
    C5e10-N2.01e4      5e10   20,136       24 x 2      3    64  4.14e5   20.5    808  8 x 64   0.0122 ...
    ...
    C1.5e12-N1.76e5  1.5e12  175,920       80 x 2     10   216  1.42e6    8.1   2776  8 x 64  0.00413 ...
    30 cells, 0 refused; total 1.53e13 FLOPs (6ND), ...
    ...
    as 9 WSD runs (one per size, its cells cooldown branches): 56,473 steps, 66% of the cells' ...
      names: cell C5e10-N1.01e4 trains as branch C-N1.01e4-wsd-D8.25e05 of run C-N1.01e4-wsd ...

Without --dry-run it trains 9 jobs, one warmup-stable-decay run per size with a cooldown
branch at each of its budgets' D (30 branches, the 30 cells; sweeps/wsd.py), two at a time
(the CPU split into two jax devices, `executor='packed'`), printing a line per job, then fits
the 30 branches and prints the headline (the compute-optimal exponents a, b of Approaches 2
and 3 with their 90% intervals, whether they agree, and Approach 3's law when it is well
determined), the law and the compute-optimal table; everything lands in runs/smoke.

The design. Byte-level decoders (vocab 258, tied embeddings, context 64) on the Python
standard library's source. Sizes are rungs of one ladder, the shape recipe's own shapes at
d_model 16, 24, ..., 80 (two layers, head_dim 8, d_ff ≈ 8/3 · d_model: 10.1k to 176k
parameters), so that neighbouring sizes differ in scale and not in kind; the previous sizes
(8.6k-120k, targets between the rungs) had d_ff / d_model zigzag from 1.3 to 3.5. Budgets 5e10,
1e11, 2e11, 4e11, 8e11, 1.5e12 FLOPs (6ND: 30x, about 2x apart), five rungs each around its
minimum; a fixed batch of 8 x 64 tokens, so that each size is one shape and one batch at every
budget: one compile, and one WSD run whose branches are its cells.

The pilot (bench/cell_probe.py, one cosine cell per line; eval loss in nats/token; at load
averages of 2-10, which change times, not losses):

* Cooling to zero. 22.4k parameters at 1.5e11, 4 seeds: decay to 0.1 x peak, mean 1.9758, sd
  0.0172; to zero, mean 1.9744, sd 0.0046. The end-of-run noise was as large as the IsoFLOP
  profiles' depth near their minima, so `final_lr_ratio = 0`.
* The LR each size prefers (the old line 1.2e-3 · (N / 1.25e8)^-1/3, capped at 3e-2, gave
  2.65e-2 at 11.6k and 1.22e-2 at 120k):
      11.6k at 1.5e11:  1.5e-2 2.007   2.65e-2 1.997 (3 seeds)   4e-2 2.040
      30.4k at 5e11:    6e-3 1.751     1e-2 1.753                3e-2 1.766
      120k at 1.5e12:   5e-3 1.584     8e-3 1.587     1.22e-2 1.616     2e-2 1.684   3e-2 1.764
  Larger sizes want a lower LR than the old line gave them (0.03 nats lost at 120k), which
  biased the profiles against them. Hence 1e-2 · (N / 3e4)^-1/2: 1.7e-2 at 10.1k, 4.1e-3 at
  176k. With it the minima move up faster (a ≈ 0.63 against 0.55 before) and the budgets'
  sizes were re-centred: the first pass of this design put the largest budget's minimum at
  0.86 of its sizes' log range and its bootstrap interval of a ran to 5.6.
* At these sizes training is limited by optimizer steps: at a fixed budget the smallest model
  gets the most steps. The smallest budget is the one whose minimum (1.2e4-1.3e4) is above
  the smallest rung; the largest is 30x it and costs 5 x C_max FLOPs whatever the schedule.

WSD or cosine. A branch and a cosine run at the same N, D, batch and peak LR agree (11.6k at
3e10: 2.297 and 2.303); Approach 3 gets every branch. With WSD a budget between two others
costs little: its cells are cooldown branches (a fifth of each branch's steps) of runs that
go on to the larger budgets anyway. Four budgets (5e10, 1.5e11, 5e11, 1.5e12; 20 cells) left
seed 1 failing two of issue 12's checks: Approach 2's interval of a was 0.38 wide and
Approaches 2 and 3 were 0.18 apart on a. Six budgets about 2x apart (30 cells, 9 runs as
before) put a minimum every factor of 2 in C, and every check passes with each of three seeds.
Five (without 4e11; 25 cells) also passes every check on seeds 0-2, but trains nearly as long,
since each size's stable run still goes to its largest budget: 168-175 s warm against 173-181 s
for the six, on the same host in the same session (bench/smoke_bench.py). The wall time follows the largest
budget and the steps per size, not the number of budgets.

What it gives (bench/smoke_bench.py, 2026-11-27; the intervals refitted 2026-11-28 with the
runs read in the order of their names, as every fit now reads runs.jsonl; Approach 2's
interval with resamples read as the data are, scaling/isoflop/bootstrap.py):

    IsoFLOP minima (Approach 2's profiles), every one strictly inside its sizes:
              5e10    1e11    2e11    4e11    8e11    1.5e12
      seed 0: 1.36e4  2.05e4  3.16e4  4.79e4  7.11e4  1.00e5
      seed 1: 1.43e4  1.95e4  2.73e4  4.22e4  6.99e4  1.15e5
      seed 2: 1.41e4  2.00e4  2.94e4  4.50e4  7.00e4  1.06e5
    a, 90% interval     Approach 2              Approach 3              |a2 - a3|
      seed 0:           0.591 [0.553, 0.658]    0.613 [0.540, 0.731]    0.022
      seed 1:           0.612 [0.570, 0.696]    0.687 [0.559, 0.855]    0.075
      seed 2:           0.597 [0.550, 0.701]    0.640 [0.532, 0.837]    0.043
    Approach 3's law (E, A, B, alpha, beta): seed 0 0.99, 19.5, 652, 0.342, 0.542;
      seed 1 0.85, 10.1, 782, 0.254, 0.556; seed 2 0.95, 14.8, 736, 0.308, 0.549
    `chinchax plan` at 1.5e13 FLOPs (10x the largest budget): 12.4, 13.9, 15.4 tokens/param

Approach 3's law is well determined on seed 0 and its headline gives it (the backtest: N* of
the largest budget missed by 4.6%, its loss by 1.9%, that budget's own N* known to ±3.2%);
on seed 1 it is flagged (residuals 4.3x the noise local fits measure, the lack-of-fit
threshold being 3x) and on seed 2 its interval of a is 0.305 wide, past 0.3, so those
headlines give Approach 2's. Runs far from a budget's minimum carry most of the misfit: at
these sizes the parametric form fits the profiles' flanks less well than their minima. The
design sits at the edge of what determines the law, and rounding moves a run either side:
the release before, whose attention's gradient rounded differently, had seed 0 flagged.

Wall time on the 2-core machine (bench/smoke_bench.py, seed 0): the release before this one
took 154 s warm (288 s of cell time, 1.94 at a time; report.md 4.9 s after the last cell) and
184 s cold, the one before it 164 s warm in the same hour (311 s, 5.7 s). In a later session
the host was slower (the smoke's train step on one core, which smoke_bench now prints after the
sweep: 98-129k tok/s at 48k parameters against 142-144k): this release took 173-181 s warm in
four runs, alternating with the release before at 171-189 s, and 222 s cold. It draws the
figures in worker processes started when one core has no cell left: report.md 4.3-5.5 s after
the last cell against 5.2-7.2 s. The train step is 89% of the cells' time. On 2026-11-28 the
host was slower again (reference 108k tok/s at 48k, 41k at 176k against 53-54k): 228 s warm for
seed 0 (421 s of cell time, 1.90 at a time, the step 87% of it) and 231 s for seed 2 (its start
shared the CPU with a fit). One core idled for the last 10-17 s: the smallest size's run (23
s), which LPT order leaves last, ends that long after the other core's last. Replayed with the
jobs' own times (five sweeps), that order ends 2-8 s after the best split of them in two, and
the best split by the time model's estimates (sweeps/chips/cpu_time.py) ends from 5.6 s sooner
to 1.6 s later than it: the estimates are not close enough to plan a better packing. Since then
a WSD job's branches are pieces of their own, which either core takes once the job's stable run
is done (sweeps/executors.py): the cells ran 1.95 at a time in two sweeps against 1.90-1.93 in
three of the release before, that day (225.4 and 238.4 s; the release before 223.3 and 228.0 s,
the host drifting by 15% within the hour: 207-255 s among that day's runs). Two cells as pinned
processes instead of threads would train 4% faster (bench/pair_bench.py). Subsets of these runs
(bench/smoke_designs.py, seeds 0-2 that day) cost less and determine less: without the largest
budget, 56-59% of the cell time, Approach 2's interval of a 0.168-0.187 wide against
0.089-0.145 and Approach 3's up to 0.44 wide against 0.31; with the largest budget's middle
three sizes, 82-84%, Approaches 2 and 3 0.216 apart on seed 1. The same kind of machine has run
40% slower (406 s warm and 475 s cold for an older release): the wall time follows the host's
speed, which the load average does not show. Where the time goes (2026-11-28, reference 116-118k
and 51k tok/s: 172-180 s warm, 204 s cold). One cell alone in the trainer's loop steps as fast
as bench/step_bench.py (10.1k parameters: 1.34 ms a step); in the sweep the three smallest
sizes step 1.3x slower than alone and the others 1.02-1.1x, and a process pinned to the other
core slows the 10.1k step by 9-13% too: the cores share cache and memory, whatever runs the
cells. XLA's kernels are 277 s of the sweep's 325 s of CPU. At 67.9k parameters attention is
45% of the step: its products of head_dim 8 run at 11-42 GFLOP/s, the weights' at 50-90.
On 2026-12-01 (reference 143k and 55k tok/s): 201 s cold; warm, once the compile cache read
every size's programs back on either core (sweeps/accel/compile_cache.py), 184 s at a reference
of 114-129k and 50-51k, compile and init 17 s of the cells' time against 45 s the run before.
Later that day, on one host (the reference 110-213k and 64-84k): cold 152-206 s in six runs,
warm 122 s at 199k and 163-168 s at 110-146k; the release before the compile work (632bbd0:
its LR table, fingerprint and saves compiled per run) 311 and 346 s cold, each just before a
cold run of this one (188 and 206 s), 1.65x and 1.67x; its cells 577-647 s against 348-384.
On 2026-12-02 (the reference 162-215k and 77-83k): 632bbd0 272 and 312 s cold (517 and 581 s
of cells), each followed by a cold run of this one, 143 and 148 s (267 and 278 s; compile 39-42
s of it), 1.90x and 2.11x; cold 162 s at 179k; warm 124 and 130 s (235 and 243 s of cells).

The LR line checked against a measured law (bench/hparams_smoke_bench.py: the
hparams_smoke sweep's runs at this sweep's batch of 8 x 64, fitted by `chinchax fit-hparams`):
eta* = 3.65 · N^-0.308 [-0.434, -0.160] · D^-0.201 [-0.452, -0.083] (90% intervals, four
points at 10.1k and 33.5k parameters, D 8.1e4-8.0e5). Over this sweep's 30 cells the line's
LR is 0.59x-1.66x the law's (median 0.96); 13 cells lie inside the law's interval and all 30
inside the band where the loss stays within 1% of the optimum (1.75x either side). The line's
-1/2 in N is steeper than the law's -0.31, and at a fixed budget (D = C/6N) the law's LR
falls only as N^-0.11: within a budget the line gives the small sizes more LR and the large
ones less than the law, by at most 1.7x, inside the 1% band. Cells past 33.5k are
extrapolations of the law; the line stays as it was.

At these sizes the exponents are not Chinchilla's: a ≈ 0.59-0.69, tokens per parameter falling
with C (about 20 at 1.5e12, 12-15 at 10x), as in small models limited by optimizer steps. The
smallest budget's minimum sits low in its sizes (0.1-0.2 of their log range: the ladder has
no rung below 10.1k), which the profile fit reads without the parabola's bias (a warning says
how large that bias would be).
"""

import ml_collections

from chinchax.sweeps.configs import sweep as sweep_config
from chinchax.sweeps.configs import train

# The shape recipe's own shapes at d_model = 16, 24, ..., 80: two layers, head_dim 8, d_ff the
# multiple of 8 nearest 8/3 · d_model, N exactly on target. One family, one width step apart.
LADDER = (10096, 20136, 33504, 48280, 67920, 90888, 114112, 143352, 175920)
# Six budgets about 2x apart over 30x: with WSD a budget between others costs only its cooldown
# branches (a fifth of each branch's steps), and each adds a minimum to Approach 2's line.
BUDGETS = (5e10, 1e11, 2e11, 4e11, 8e11, 1.5e12)
# Five rungs per budget around its minimum in the pilot (docstring). The smallest budget's
# minimum (1.2e4-1.4e4) sits low in its sizes: the ladder has no rung below 10.1k.
SIZES = (LADDER[0:5], LADDER[0:5], LADDER[0:5], LADDER[1:6], LADDER[2:7], LADDER[4:9])
BATCH = 8  # sequences of 64 bytes, at every budget: one compile per shape, one WSD run per size


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  if arg not in (None, "", "tasks"):
    raise ValueError(f"unknown preset {arg!r} for smoke.py: use tasks, or none")
  t = train.get_config("cpu")
  t.model.tied = True
  t.seq_len = 64
  t.optimizer.final_lr_ratio = 0.0  # cool down to zero: 3.7x less seed noise (docstring)
  t.eval_every, t.eval_tokens, t.log_every = 2000, 32768, 200
  t.checkpoint.update(every_steps=2000, every_minutes=5.0, keep=1)

  if arg == "tasks":  # every eval also scores the built-in task (sweeps/data/choices.py)
    t.tasks = ("stdlib_next_line",)
  c = sweep_config.base_config(t)
  c.name = "smoke"
  c.budgets = BUDGETS
  c.sizes = SIZES
  c.schedule = "wsd"         # one run per size, a cooldown branch at each of its budgets
  c.prior = "tokens_per_param:50"  # only for budgets added without sizes
  c.min_steps = 100
  c.vocab_size = 258         # bytes: 256 values, end-of-document, padding
  c.recipe.min_d_model = 16
  c.recipe.batch_rule, c.recipe.batch_tokens = "fixed", BATCH * t.seq_len
  # The LR each size preferred in the pilot: 1e-2 at 3e4 parameters, falling as N^-1/2.
  c.recipe.lr_ref, c.recipe.lr_N_ref, c.recipe.lr_exponent = 1e-2, 3e4, 0.5
  c.recipe.lr_max = 3e-2
  # Two cells at a time, one per core: each keeps about one core busy.
  c.executor, c.cpu_devices = "packed", 2
  return c
