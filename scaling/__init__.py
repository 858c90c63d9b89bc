"""What the runs mean: parameter/FLOP conventions, the three fits, law.json, the planner.

No jax: numbers in, numbers and artifacts (law.json, plots) out, all file I/O through
`atomic`. Imports nothing from `sweeps/` or `models/` and needs no accelerator; `models/`
and `sweeps/` import it (one source of truth for FLOP counting).
"""
