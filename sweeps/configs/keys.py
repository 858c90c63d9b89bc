"""One line per config key, for `chinchax sweep --help` and `chinchax train --help`.

Keys of a train config (sweeps/configs/train.py) are listed bare; a sweep config holds one
under `train.` (grid.base_config). tests/cli/test_help.py checks that every key of every
named config has its line here.
"""

TRAIN = {
    "seed": "seed of the initialisation and the data order",
    "name": "the run's name in its records",
    "model.N": "a target parameter count for the shape recipe (0: the explicit shape below)",
    "model.d_model": "width of the residual stream",
    "model.n_layers": "decoder blocks",
    "model.n_heads": "attention heads (head_dim = d_model / n_heads)",
    "model.d_ff": "hidden width of the MLP",
    "model.vocab_size": "0 takes the tokenizer's; any other value must equal it",
    "model.tied": "tie the output head to the embedding",
    "model.compute_dtype": "float32 | bfloat16: activations and matmuls",
    "model.param_dtype": "float32 | bfloat16: stored parameters",
    "model.remat": "rematerialisation of the blocks: none | minimal | full",
    "model.z_loss": "weight of the log-partition penalty (0: off)",
    "data.name": "stdlib, or a TFDS dataset prepared in array_record form under data_dir",
    "data.corpus": "a directory or glob of text files; when set, wins over name",
    "data.data_dir": "the TFDS data dir (default $TFDS_DATA_DIR)",
    "data.text_key": "the text field of the dataset's records",
    "data.tokenizer": "bytes | spm",
    "data.spm_model": "the SentencePiece model file (tokenizer=spm); needed on every host",
    "data.unique_tokens_cap": "U: train on the first U tokens only (0: the whole split)",
    "data.mixture.sources": "curriculum sources (corpus, stdlib or TFDS name); empty: off",
    "data.mixture.weights": "one weight tuple per stage, or (start, end) for linear/cosine",
    "data.mixture.kind": "stages | linear | cosine",
    "data.mixture.boundaries": "where each stage starts, as a fraction of training",
    "seq_len": "tokens per sequence",
    "batch_size": "sequences per optimizer step",
    "seq_len_start": "sequence-length warmup: the first length (0: off)",
    "seq_len_warmup_fraction": "fraction of steps over which the length doubles up to seq_len",
    "grad_accum": "microbatches per step; the batch is split when it does not fit",
    "tokens": "D: training tokens; steps = ceil(D / (batch_size * seq_len))",
    "optimizer.peak_lr": "the learning rate after warmup",
    "optimizer.warmup_steps": "linear warmup steps",
    "optimizer.final_lr_ratio": "the last learning rate as a fraction of the peak",
    "optimizer.schedule": "cosine | wsd | constant: the schedule after warmup",
    "optimizer.decay_fraction": "wsd: the fraction of steps spent decaying",
    "optimizer.b1": "AdamW first-moment decay",
    "optimizer.b2": "AdamW second-moment decay",
    "optimizer.eps": "AdamW epsilon",
    "optimizer.weight_decay": "decoupled weight decay",
    "optimizer.clip_norm": "global gradient-norm clip",
    "eval_every": "steps between held-out evals",
    "eval_tokens": "the fixed held-out slice the reported loss is averaged over",
    "log_every": "steps between metrics rows (and progress updates)",
    "spike_factor": "fail when the loss exceeds this x its running mean (after warmup)",
    "checkpoint.every_steps": "save every this many steps",
    "checkpoint.every_minutes": "and at least this often",
    "checkpoint.keep": "checkpoints kept",
    "checkpoint.keep_best": "also keep the lowest-eval checkpoint in checkpoints_best/",
    "early_stop.patience": "evals without improvement before stopping (0: off)",
    "early_stop.min_rel_improvement": "the relative improvement that counts",
    "mesh.data": "data-parallel axis size (-1: the devices left over)",
    "mesh.fsdp": "fully-sharded axis size",
    "mesh.tensor": "tensor-parallel axis size",
    "sharding": "fsdp | shard_grad_op",
    "budget": "the nominal C of a sweep cell (0: not part of a sweep)",
    "wsd.branches": "token counts D_i of cooldown branches (non-empty: a WSD run)",
    "wsd.decay_fraction": "each branch decays over this fraction of its steps",
    "wsd.save_steps": "set by sweeps/wsd.py",
    "wsd.budgets": "the nominal C of each branch (a sweep's IsoFLOP cells; set by the sweep)",
    "init_from": "a checkpoint folder to start from when the run has none of its own",
    "branch_of": "the run this one branches off (recorded in result.json)",
}

SWEEP = {
    "name": "the sweep's name",
    "budgets": "compute budgets C in FLOPs, one IsoFLOP group each",
    "flops": "the convention the budgets are spent in: 6ND | chinchilla",
    "prior": "N*(C) the sizes centre on: preset:NAME | tokens_per_param:R | law.json path",
    "n_per_budget": "sizes per budget, log-spaced over +-span decades around N*(C)",
    "span": "decades either side of N*(C)",
    "sizes": "explicit sizes instead: one flat list, or one list per budget",
    "fixed_n.sizes": "Approach 1: model sizes trained at several D",
    "fixed_n.tokens_per_param": "Approach 1: the D/N ratios of each size",
    "fixed_n.schedule": "cosine (one run per D) | wsd (one run, cooldown branches)",
    "min_steps": "cells with fewer planned steps are refused",
    "allow_repeats": "False: refuse cells whose D exceeds the corpus's unique tokens",
    "vocab_size": "the tokenizer's vocabulary (shapes and N depend on it)",
    "recipe.lr_rule": "size (peak LR from N) | deepseek | fixed | law:PATH (a fitted "
                      "hparams.json: chinchax fit-hparams)",
    "recipe.lr_ref": "size rule: the peak LR at lr_N_ref",
    "recipe.lr_N_ref": "size rule: the reference N",
    "recipe.lr_exponent": "size rule: LR ∝ (N / lr_N_ref)^-lr_exponent",
    "recipe.lr_max": "size rule: the LR cap",
    "recipe.peak_lr": "fixed rule: the peak LR of every cell",
    "recipe.batch_rule": "deepseek (batch from C) | fixed | law:PATH (a fitted hparams.json)",
    "recipe.batch_tokens": "fixed rule: tokens per batch",
    "recipe.batch_multiple": "sequences per batch are a multiple of this",
    "recipe.warmup_fraction": "warmup steps as a fraction of each cell's steps",
    "recipe.min_d_model": "the smallest width the shape recipe uses",
    "recipe.min_layers": "the fewest layers the shape recipe uses",
    "schedule": "cosine (one run per IsoFLOP cell) | wsd (one WSD run per shape and batch, "
                "a cooldown branch at each budget's D)",
    "executor": "where cells run: local | packed | ray",
    "devices_per_cell": "packed: devices of each cell's sub-mesh",
    "cpu_devices": "a CPU host split into this many jax devices, so that the packed executor "
                   "runs that many cells at once (0: jax's default of one; no effect on "
                   "accelerators)",
    "ray_address": "ray: the cluster to join; empty starts a local one",
    "ray_num_cpus": "ray: CPUs each cell's task holds",
    "ray_num_gpus": "ray: GPUs each cell's task holds",
    "ray_tpus": "ray: TPU chips each cell's task holds",
    "bootstrap": "resamples of the fit's intervals (0: none)",
    "hparams.lr_factors": "an LR grid: each cell trained at these multiples of the recipe's LR "
                          "(then the sweep fits hparams.json, not law.json)",
    "hparams.batch_factors": "a batch grid: each cell trained at these multiples of the "
                             "recipe's batch",
    "target": "the TPU slice the dry run compiles for (--compile), or a GPU node (h100:8) "
              "whose peak prices the dry run's time column",
}


def meaning(key: str, sweep: bool) -> str | None:
  """The one-line meaning of `key` in a sweep (or train) config; None if it has none."""
  if sweep:
    if key in SWEEP:
      return SWEEP[key]
    if key.startswith("train."):
      return TRAIN.get(key[len("train."):])
    return None
  return TRAIN.get(key)
