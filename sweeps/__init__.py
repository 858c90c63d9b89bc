"""How runs are made and run: the sweep's own modules here (grid, spec, jobs, executors, WSD,
report, dry run, console, lock), one training run in `train/`, accelerator readiness in
`accel/`, the chip table in `chips/`, the data in `data/`, the CLI in `cli/` and the configs
in `configs/`; no folder imports from one above it. docs/DESIGN.md has the map."""
