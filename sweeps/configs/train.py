r"""One training run on the default corpus (the Python standard library's source), on CPU.

    chinchax train --config=sweeps/configs/train.py --workdir=/tmp/chinchax-train

builds the corpus on first use (~12 MB of text into ~/.cache/chinchax), then prints (Python
3.11's standard library, 2 CPU cores; the losses depend on the Python version, the speeds on
the machine)

    compiled the train step in 4.3 s; 391 steps of 32 x 128 tokens, N=0.49M
    step 20/391 | loss 2.8602 | 7.0k tok/s | 3:37 left
    step 40/391 | loss 2.4768 | 7.7k tok/s | 3:06 left
    ...                                                  (a line every `log_every` steps)
    step 391/391 | loss 1.4253 | 11.0k tok/s | 0:00 left
    done: eval loss 1.6036 nats/token (2.314 bits/byte), N=0.49M, D=1.60M tokens

and leaves config.json, metrics.jsonl, tensorboard/, checkpoints/ and result.json in the
workdir. Rerun the same command to resume a stopped run; a finished one is not trained again.
With --dry-run it prints the run's plan (shape, N, D, steps, schedule, mesh, the features on)
without opening the data or writing a file.

ARG picks a preset: `cpu` (default: 0.49M parameters, 1.6M tokens, 2-4 minutes on 2 cores),
`tiny` (for tests: 24 steps, a few seconds after compiling). Any key can be overridden:
`--config.optimizer.peak_lr=1e-3`, `--config.model.n_layers=4`, `--config.tokens=4e6`,
`--config.data.corpus=/path/to/texts` (a directory or glob of text files).
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.name = "train"

  # Model: an explicit shape, or `N` (a target parameter count) for the shape recipe.
  # vocab_size 0 takes the tokenizer's; any other value must equal it (checked before compute).
  c.model = ml_collections.ConfigDict(dict(
      N=0, d_model=128, n_layers=2, n_heads=4, d_ff=384, vocab_size=0, tied=False,
      compute_dtype="float32", param_dtype="float32", remat="none", z_loss=0.0))

  # corpus (a directory or glob of text files), when set, wins over name (stdlib or a TFDS
  # dataset prepared in array_record form under data_dir).
  c.data = ml_collections.ConfigDict(dict(
      name="stdlib", corpus="", data_dir="", text_key="text", tokenizer="bytes", spm_model="",
      unique_tokens_cap=0))  # U: train on the first U tokens only (0: the whole split)
  # A curriculum over several sources (sweeps/data/mixture.py); empty `sources`: off. Each
  # source is a corpus path/glob, "stdlib" or a prepared TFDS name; `weights` holds one tuple
  # per stage (kind=stages, starting at `boundaries`) or (start, end) for linear/cosine.
  c.data.mixture = ml_collections.ConfigDict(dict(
      sources=(), weights=(), kind="stages", boundaries=(0.0,)))
  c.seq_len = 128
  c.batch_size = 32
  # Sequence-length warmup (sweeps/data/seqlen.py): start at seq_len_start (0: off) and double
  # up to seq_len over the first seq_len_warmup_fraction of steps, at constant tokens per batch.
  c.seq_len_start = 0
  c.seq_len_warmup_fraction = 0.1
  c.grad_accum = 1       # microbatches per step; the batch is split when it does not fit
  c.tokens = 1.6e6       # D: training tokens; steps = ceil(D / (batch_size * seq_len))

  c.optimizer = ml_collections.ConfigDict(dict(
      peak_lr=3e-3, warmup_steps=40, final_lr_ratio=0.1, schedule="cosine",
      decay_fraction=0.2, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1, clip_norm=1.0))

  c.eval_every = 100
  c.eval_tokens = 65536  # the fixed held-out slice the reported loss is averaged over
  c.log_every = 20
  c.spike_factor = 4.0   # fail when the loss exceeds this × its running mean (after warmup)

  c.checkpoint = ml_collections.ConfigDict(dict(every_steps=200, every_minutes=10.0, keep=2,
                                                keep_best=False))  # checkpoints_best/: lowest eval
  # Stop when `patience` evals in a row fail to improve the best eval loss by the relative
  # `min_rel_improvement` (sweeps/train/early_stop.py); 0 turns it off. Not for sweep cells.
  c.early_stop = ml_collections.ConfigDict(dict(patience=0, min_rel_improvement=0.0))
  c.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  c.sharding = "fsdp"    # fsdp (params, grads, optimizer state sharded) | shard_grad_op
  c.budget = 0.0         # the nominal C of a sweep cell (0: not part of a sweep)

  # Warmup-stable-decay with cooldown branches (sweeps/wsd.py): a non-empty `branches`
  # (token counts D_i) makes `chinchax train` run one constant-LR run plus one short decay per
  # D_i, each decaying over its last `decay_fraction` of steps. `budgets`: the nominal C of
  # each branch in a sweep's IsoFLOP design (empty: none). `save_steps` is set by wsd.py.
  c.wsd = ml_collections.ConfigDict(dict(branches=(), decay_fraction=0.2, budgets=(),
                                         save_steps=()))
  c.init_from = ""       # a checkpoint folder to start from when the run has none of its own
  c.branch_of = ""       # the run this one branches off (recorded in result.json)

  if arg in (None, "", "cpu"):
    pass
  elif arg == "tiny":
    c.model.update(d_model=32, n_layers=1, n_heads=2, d_ff=96)
    c.seq_len, c.batch_size, c.tokens = 32, 8, 8 * 32 * 24
    c.optimizer.warmup_steps = 4
    c.eval_every, c.eval_tokens, c.log_every = 8, 2048, 4
    c.checkpoint.every_steps = 8
  else:
    raise ValueError(f"unknown preset {arg!r} for train.py: use cpu or tiny")
  return c
