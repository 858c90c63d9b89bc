"""One training run, all of it: its config resolved (`config`), everything it needs built once
(`setup`), the loop that trains it (`loop`) with its steps beside it (`step`: the sharded train
and eval steps, `optimizer`), the training-craft features and the inputs as hooks (`hooks`),
checkpoints with their fingerprints (`checkpoint`, `fingerprint`), the stop flag and early
stopping (`stop`), metrics.jsonl, TensorBoard and the phases' times (`metrics`), its
record (`loop.record_of`, read and written by `scaling.runs.records`), its plan (`describe`) and the probe of its checkpoints (`probe`).

`chinchax.sweeps.train.loop.train(config, workdir)` is the run every sweep cell executes. Nothing
here imports the sweep above it (grid, spec, jobs, executors, WSD).
"""
