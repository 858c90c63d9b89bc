"""The chips a run can meet, as facts: one table of each TPU generation and GPU model
(`hardware`: memory, dense bf16 peak for MFU, the slices and nodes a target names, the
hardware facts every run record stores), and what a run costs on a CPU host (`cpu_time`: the
dry run's estimate there, and the packed executor's order). It sits below the trainer
(`train/`), accelerator readiness (`accel/`) and the launchers (`launch/`), which all read it,
and imports nothing of sweeps/."""
