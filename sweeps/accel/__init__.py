"""Accelerator readiness: a cell's steps compiled ahead of time for a target it need not have
(`aot`), what each compile reported (`aot_cache`), jax's cache of compiled steps across
processes (`compile_cache`), every cell checked against its target's memory with the remedy
when it does not fit (`readiness`), and the compiled program's FLOPs against the analytic
count (`hlo_flops`). The facts of each accelerator are the chip table's (`sweeps/chips/`)."""
