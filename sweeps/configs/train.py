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

from chinchax.sweeps.configs import keys

K = keys.Key
FREE = dict(role=keys.FREE)

# Every key of a train config: its default and its meaning, declared once here (`--help` prints
# them; a sweep config holds them under `train.`). Checked by sweeps/train/config.py. A key
# marked FREE changes nothing a run measures: a resume may change it; any other change of a
# run's config is refused (sweeps/configs/identity.py).
KEYS = (
    K("seed", 0, "seed of the initialisation and the data order"),
    K("name", "train", "the run's name in its records", **FREE),
    # Model: an explicit shape, or `N` (a target parameter count) for the shape recipe.
    K("model.N", 0, "a target parameter count for the shape recipe (0: the explicit shape below)"),
    K("model.d_model", 128, "width of the residual stream"),
    K("model.n_layers", 2, "decoder blocks"),
    K("model.n_heads", 4, "attention heads (head_dim = d_model / n_heads)"),
    K("model.d_ff", 384, "hidden width of the MLP"),
    K("model.vocab_size", 0, "0 takes the tokenizer's; any other value must equal it "
      "(checked before compute)"),
    K("model.tied", False, "tie the output head to the embedding"),
    K("model.compute_dtype", "float32", "float32 | bfloat16: activations and matmuls"),
    K("model.param_dtype", "float32", "float32 | bfloat16: stored parameters"),
    K("model.remat", "none", "rematerialisation of the blocks: none | minimal | full", **FREE),
    K("model.z_loss", 0.0, "weight of the log-partition penalty (0: off)"),
    # FREE like remat: the same maths, computed another way (rounding differs, as on
    # another backend, which a resume may also move to).
    K("model.attention", "auto", "the causal attention's kernel: auto (cudnn on a GPU in "
      "bfloat16, else xla) | xla (written out) | cudnn (fused, flash)", **FREE),
    K("data.name", "stdlib", "stdlib, or a TFDS dataset prepared in array_record form under "
      "data_dir"),
    K("data.corpus", "", "a directory or glob of text files; when set, wins over name"),
    K("data.data_dir", "", "the TFDS data dir (default $TFDS_DATA_DIR)", **FREE),
    K("data.text_key", "text", "the text field of the dataset's records"),
    K("data.tokenizer", "bytes", "bytes | spm"),
    K("data.spm_model", "", "the SentencePiece model file (tokenizer=spm); needed on every host"),
    K("data.unique_tokens_cap", 0, "U: train on the first U tokens only (0: the whole split)"),
    # A curriculum over several sources (sweeps/data/mixture.py).
    K("data.mixture.sources", (), "curriculum sources (corpus, stdlib or TFDS name); empty: off"),
    K("data.mixture.weights", (), "one weight tuple per stage, or (start, end) for "
      "linear/cosine"),
    K("data.mixture.kind", "stages", "stages | linear | cosine"),
    K("data.mixture.boundaries", (0.0,), "where each stage starts, as a fraction of training"),
    K("seq_len", 128, "tokens per sequence"),
    K("batch_size", 32, "sequences per optimizer step"),
    # Sequence-length warmup (sweeps/data/seqlen.py), at constant tokens per batch.
    K("seq_len_start", 0, "sequence-length warmup: the first length (0: off)"),
    K("seq_len_warmup_fraction", 0.1, "fraction of steps over which the length doubles up to "
      "seq_len"),
    K("grad_accum", 1, "microbatches per step; the batch is split when it does not fit", **FREE),
    K("tokens", 1.6e6, "D: training tokens; steps = ceil(D / (batch_size * seq_len))"),
    K("optimizer.peak_lr", 3e-3, "the learning rate after warmup"),
    K("optimizer.warmup_steps", 40, "linear warmup steps"),
    K("optimizer.final_lr_ratio", 0.1, "the last learning rate as a fraction of the peak"),
    K("optimizer.schedule", "cosine", "cosine | wsd | constant: the schedule after warmup"),
    K("optimizer.decay_fraction", 0.2, "wsd: the fraction of steps spent decaying"),
    K("optimizer.b1", 0.9, "AdamW first-moment decay"),
    K("optimizer.b2", 0.95, "AdamW second-moment decay"),
    K("optimizer.eps", 1e-8, "AdamW epsilon"),
    K("optimizer.weight_decay", 0.1, "decoupled weight decay"),
    K("optimizer.clip_norm", 1.0, "global gradient-norm clip"),
    K("eval_every", 100, "steps between held-out evals"),
    K("eval_tokens", 65536, "the fixed held-out slice the reported loss is averaged over"),
    # Identity: a task changes what a run records, and fit-tasks pools every run's evaluations
    # of a task, so a workdir's runs must all score the same ones (sweeps/train/tasks.py).
    K("tasks", (), "multiple-choice tasks scored at every eval: built-in names "
      "(stdlib_next_line) or .jsonl files of {context, choices, answer}; their bits per byte "
      "and accuracy go to metrics.jsonl and result.json"),
    K("log_every", 20, "steps between metrics rows (and progress updates)", **FREE),
    # Free: a chunk's steps are the single step's, to the bit (tests/sweeps/test_chunk.py).
    K("steps_per_dispatch", 16, "train steps per dispatch to the devices, at most: one compiled "
      "loop over the step, cut short at every log, eval, checkpoint and branch step; a stop "
      "flag is acted on at the end of a dispatch (1: a dispatch per step)", **FREE),
    K("spike_factor", 4.0, "fail when the loss exceeds this x its running mean (after warmup)"),
    K("checkpoint.every_steps", 200, "save every this many steps", **FREE),
    K("checkpoint.every_minutes", 10.0, "and at least this often", **FREE),
    K("checkpoint.keep", 2, "checkpoints kept", **FREE),
    K("checkpoint.keep_best", False, "also keep the lowest-eval checkpoint in checkpoints_best/",
      **FREE),
    # Early stopping (sweeps/train/stop.py); not for sweep cells.
    K("early_stop.patience", 0, "evals without improvement before stopping (0: off)"),
    K("early_stop.min_rel_improvement", 0.0, "the relative improvement that counts"),
    K("mesh.data", -1, "data-parallel axis size (-1: the devices left over)", **FREE),
    K("mesh.fsdp", 1, "fully-sharded axis size", **FREE),
    K("mesh.tensor", 1, "tensor-parallel axis size", **FREE),
    K("sharding", "fsdp", "fsdp (params, grads, optimizer state sharded) | shard_grad_op", **FREE),
    K("budget", 0.0, "the nominal C of a sweep cell (0: not part of a sweep)"),
    # Warmup-stable-decay with cooldown branches (sweeps/wsd.py): a non-empty `branches` makes
    # `chinchax train` run one constant-LR run plus one short decay per D_i.
    K("wsd.branches", (), "token counts D_i of cooldown branches (non-empty: a WSD run)"),
    K("wsd.decay_fraction", 0.2, "each branch decays over this fraction of its steps"),
    K("wsd.budgets", (), "the nominal C of each branch (a sweep's IsoFLOP cells; set by the "
      "sweep)"),
    K("wsd.save_steps", (), "set by sweeps/wsd.py"),
    K("wsd.stable_evals", False, "the stable run also evaluates every eval_every steps (off: "
      "only its last step; its losses are no fit point, its branches' are)"),
    # Free: read only while the run has no checkpoint of its own, so a resume that moved the
    # workdir (an absolute init_from changes with it) changes nothing trained.
    K("init_from", "", "a checkpoint folder to start from when the run has none of its own",
      **FREE),
    K("branch_of", "", "the run this one branches off (recorded in result.json)"),
)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = keys.config(KEYS)
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
