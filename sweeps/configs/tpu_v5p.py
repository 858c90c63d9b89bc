r"""An IsoFLOP sweep from 1e17 to 1e19 FLOPs on a Cloud TPU v5p-32 slice (16 chips, 4 hosts).

    python -m chinchax.launch.tpu all --name=chinchax-v5p --project=P --zone=Z --accelerator=v5p-32 \
        --config=sweeps/configs/tpu_v5p.py --workdir=gs://BUCKET/chinchax/c4-v5p \
        --config.train.data.data_dir=gs://BUCKET/tensorflow_datasets \
        --config.train.data.spm_model=/home/$USER/c4_32k.model

which runs `chinchax sweep` with that config on every host (`--worker=all`); the workdir is a
`gs://` path because the hosts share no disk. With --dry-run it prints the grid and exits:

    cell              C            N  d_model x L  heads  d_ff        D    D/N  steps       batch  peak LR  C 6ND  C chinchilla   time
    -------------  ----  -----------  -----------  -----  ----  -------  -----  -----  ----------  -------  -----  ------------  -----
    C1e17-N8.84e6  1e17    8,839,808      128 x 2      8   672   1.89e9  213.3  19179   48 x 2048  0.00145   1e17       1.12e17    45s
    C1e17-N1.35e7  1e17   13,450,560      192 x 3     12   416   1.24e9   92.1  12605   48 x 2048  0.00126   1e17       1.18e17    45s
    ...
    C1e19-N4.88e8  1e19  488,295,680    1280 x 20     10  3584   3.41e9    7.0   6944  240 x 2048  3.81e-4   1e19       1.22e19   1.3h
    C1e19-N7.22e8  1e19  722,409,984    1536 x 23     12  3840   2.31e9    3.2   4694  240 x 2048  3.34e-4   1e19        1.2e19   1.3h

    35 cells, 0 refused; total 1.01e20 FLOPs (6ND), 1.27e20 (chinchilla); about 12.7h of training
    time at 30% of the 16 x 4.59e14 FLOP/s peak of the target v5p:2x2x4 (6ND FLOPs)

Before renting the slice, `--dry-run --compile` compiles every cell for v5p:2x2x4 on this
machine (needs `pip install "chinchax[tpu]"`; 38 min on 2 cores, 48 s when run again) and ends

    cell                     N       batch    mesh    remat  HBM/chip GiB    args  temps  fits  FLOPs compiled/chinchilla  compile s
    -------------  -----------  ----------  ------  -------  ------------  ------  -----  ----  -------------------------  ---------
    ...
    C1e19-N7.22e8  722,409,984  240 x 2048  16x1x1  minimal          48.1    8.07     40   yes                      1.003         56

    35 cells compiled for v5p:2x2x4 (16 devices, 95.7 GiB HBM each, 10% kept free: 86.2 GiB
    for the program) in 37.9 min; 35 fit, 0 refused

Expected time: 1.0e20 FLOPs (6ND) over 35 cells. At 40% MFU of 16 × 459 TFLOP/s (bf16
dense), 2.9e15 FLOP/s, that is ~9.5 h; with the smallest models below that MFU, 10-14 h.

Data: `c4/en:3.0.1` prepared in array_record form under `train.data.data_dir`, tokenised with
a 32000-piece SentencePiece model present on every host (e.g. T5's
gs://t5-data/vocabs/cc_all.32000/sentencepiece.model). `vocab_size` must equal its piece count.

Grid: the GPU node's (sweeps/configs/gpu_node.py): 5 budgets × 7 sizes over ±0.5 decades
around Hoffmann et al.'s N*(C), seq_len 2048, bf16 compute; the batch is a multiple of 16
sequences so that each chip holds an equal shard.
"""

import ml_collections

from chinchax.sweeps.configs import gpu_node


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = gpu_node.get_config(arg)
  c.name = "c4-tpu-v5p"
  c.target = "v5p:2x2x4"  # v5p-32: what `chinchax sweep --dry-run --compile` compiles for
  c.recipe.batch_multiple = 16
  # Without remat the largest cell (723M, 15 sequences of 2048 per chip) needs 288 GiB of HBM
  # per chip, mostly attention logits kept for the backward pass; minimal remat keeps the
  # weight matmuls' outputs and recomputes the rest: 48 GiB (`--dry-run --compile`, libtpu
  # 0.0.42: 8.1 GiB of arguments, 40 GiB of temporaries).
  c.train.model.remat = "minimal"
  c.train.mesh.update(data=-1, fsdp=1, tensor=1)  # data-parallel over the 16 chips
  c.train.checkpoint.update(every_steps=2000, every_minutes=20.0, keep=2)
  return c
