"""Launchers that start `chinchax sweep` on Cloud TPU slices, GPU hosts and this machine.

Not part of the installed distribution: run them from a checkout, `python -m chinchax.launch.tpu ...`.
"""
