"""The processes of one job: joining the distributed job the environment describes, checking
that every process runs the same thing (`distributed`), and the stop every process agrees
on, with a lost process named (`watch`). The trainer, the data pipeline and the commands use
it; it imports nothing of them."""
