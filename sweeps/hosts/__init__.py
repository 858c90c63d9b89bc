"""The processes of one job: joining the distributed job the environment describes, checking
that every process runs the same thing (`distributed`, after the roll call: `rollcall`), the
stop every process agrees on, with a lost process named (`watch`), a step that never finishes
(`watchdog`), and what native code prints and jax's aborts (`native`). The trainer, the data
pipeline and the commands use it; it imports nothing of them."""
