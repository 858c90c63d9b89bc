"""Task laws: downstream-task accuracy from N and D in two steps (the task's loss from N and
D, then accuracy from that loss), their joint bootstrap over runs, tasks.json, and the
predictions `chinchax plan --tasks` prints."""
