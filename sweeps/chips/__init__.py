"""The chips a run can meet, as facts: one table of each TPU generation and GPU model
(`hardware`: memory, dense bf16 peak for MFU, the slices and nodes a target names, the
hardware facts every run record stores). It sits below the trainer (`train/`), accelerator
readiness (`accel/`) and the launchers (`launch/`), which all read it, and imports nothing of
sweeps/."""
