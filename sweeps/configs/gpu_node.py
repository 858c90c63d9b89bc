r"""An IsoFLOP sweep from 1e17 to 1e19 FLOPs on one 8-GPU node (H100 80 GB) on C4.

    chinchax sweep --config=sweeps/configs/gpu_node.py --workdir=/data/chinchax/c4-gpu \
        --config.train.data.spm_model=/data/spm/c4_32k.model

(or `python -m chinchax.launch.gpu ...`, which sets the XLA environment). With --dry-run it prints the
grid and exits:

    cell              C            N  d_model x L  heads  d_ff        D    D/N  steps       batch  peak LR  C 6ND  C chinchilla ...
    -------------  ----  -----------  -----------  -----  ----  -------  -----  -----  ----------  -------  -----  ------------  -----
    C1e17-N8.84e6  1e17    8,839,808      128 x 2      8   672   1.89e9  213.3  19179   48 x 2048  0.00145   1e17       1.12e17    42s
    C1e17-N1.35e7  1e17   13,450,560      192 x 3     12   416   1.24e9   92.1  12605   48 x 2048  0.00126   1e17       1.18e17    42s
    ...
    C1e19-N4.88e8  1e19  488,295,680    1280 x 20     10  3584   3.41e9    7.0   7184  232 x 2048  3.81e-4   1e19       1.22e19   1.2h
    C1e19-N7.22e8  1e19  722,409,984    1536 x 23     12  3840   2.31e9    3.2   4856  232 x 2048  3.34e-4   1e19        1.2e19   1.2h

    35 cells, 0 refused; total 1.01e20 FLOPs (6ND), 1.27e20 (chinchilla); about 11.8h of training
    time at 30% of the 8 x 9.89e14 FLOP/s peak of the target h100:8 (6ND FLOPs)

Before renting the node, `--dry-run --compile` compiles every cell for h100:8 on this machine
without a GPU (needs `pip install "chinchax[gpu-compile]"`; 23 min on a shared 2-core machine,
54 s when run again) and ends

    cell                     N       batch   mesh    remat  HBM/chip GiB  args  temps  fits  FLOPs compiled/chinchilla  compile s
    ...
    C1e19-N7.22e8  722,409,984  232 x 2048  1x8x1  minimal          59.4  1.01   58.3    NO                      1.002         67

    35 cells compiled for h100:8 (8 devices, 79.1 GiB each, XLA's pool 75% of it
    (XLA_PYTHON_CLIENT_MEM_FRACTION): 59.3 GiB, 10% of that kept free: 53.4 GiB for the
    program) in 23.0 min; 34 fit, 1 refused
      C1e19-N7.22e8: refused: needs 59.4 GiB of HBM per chip > 53.4; fits with
      --config.train.model.remat=full (23.8 GiB/chip)

With XLA_PYTHON_CLIENT_MEM_FRACTION=0.9, what `launch/gpu.py` gives each process, the budget
is 64.1 GiB and all 35 fit; run `chinchax sweep` plainly (75%) and that cell needs remat full.

Expected time: the 35 cells total 1.0e20 FLOPs (6ND). At 35% MFU of 8 × 989 TFLOP/s
(bf16 dense), 2.8e15 FLOP/s, that is ~10 h; the smallest models run below that MFU, so plan
for 10-15 h. `chinchax sweep --dry-run` with a measured throughput prints the estimate per cell.

Data: `c4/en:3.0.1` prepared in array_record form under `train.data.data_dir` (chinchax reads
prepared TFDS datasets and downloads nothing), tokenised with a 32000-piece SentencePiece
model, e.g. T5's (gs://t5-data/vocabs/cc_all.32000/sentencepiece.model, copied locally).
`vocab_size` must equal the model's piece count.

Grid: 5 budgets × 7 sizes log-spaced over ±0.5 decades around Hoffmann et al.'s N*(C)
(`preset:hoffmann2022`), seq_len 2048, bf16 compute, batch a multiple of 8 sequences (one
equal shard per GPU). Aim a second, larger sweep with `--config.prior=/path/to/law.json` from
`chinchax fit` of this one.
"""

import ml_collections

from chinchax.sweeps.configs import sweep as sweep_config
from chinchax.sweeps.configs import train


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  del arg  # no presets
  t = train.get_config()
  t.data.update(name="c4/en:3.0.1", data_dir="", text_key="text", tokenizer="spm",
                spm_model="")
  # Compiled for h100:8 on a CPU (`--dry-run --compile`, jax 0.10.2's CUDA plugin): without
  # remat the largest cell (723M, 29 sequences of 2048 per GPU) needs 347 GiB per GPU, the
  # 1e17 budget's largest 23 GiB; minimal remat keeps the weight matmuls' outputs: 68 GiB
  # data-parallel, 59 GiB with parameters and AdamW's moments sharded over the node's 8 GPUs
  # (FSDP on NVLink; across nodes, `data` replicates: h100:16 is data 2 x fsdp 8). Those
  # figures compile attention written out, as a machine without cuDNN does; on the GPU it is
  # cuDNN's fused kernel (model.attention=auto), with less memory (one H200, 50M: 8.8 GiB
  # against 12.1) and at 39-47% MFU on one H200 (bench/gpu_bench.py).
  t.model.update(compute_dtype="bfloat16", param_dtype="float32", remat="minimal")
  t.seq_len = 2048
  t.eval_every, t.eval_tokens, t.log_every = 1000, 2**22, 100
  t.checkpoint.update(every_steps=2000, every_minutes=30.0, keep=2)
  t.mesh.update(data=-1, fsdp=8, tensor=1)

  c = sweep_config.base_config(t)
  c.name = "c4-gpu-node"
  c.budgets = (1e17, 3e17, 1e18, 3e18, 1e19)
  c.prior = "preset:hoffmann2022"
  c.n_per_budget = 7
  c.span = 0.5
  c.min_steps = 500
  c.vocab_size = 32000
  c.recipe.batch_multiple = 8
  c.target = "h100:8"  # what the dry run prices and `--dry-run --compile` compiles for
  return c
