"""How runs are made and run: the single run (`run/`) and what it uses (`data/`, `step`,
`optimizer`, `checkpoint`, `metrics`); the grid, the sweep and its executors, WSD and the
report over it; the CLI (`cli/`) and the configs (`configs/`). docs/DESIGN.md has the map."""
