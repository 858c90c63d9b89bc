"""One training run: its config resolved (`config`), everything it needs built once (`setup`),
the loop that trains it (`loop`), the training-craft features as hooks (`hooks`, `inputs`),
its record (`record`) and the probe of its checkpoints (`probe`).

`chinchax.sweeps.run.loop.train(config, workdir)` is the run every sweep cell executes.
"""
