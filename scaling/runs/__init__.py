"""Runs and their files: the parameter and FLOP conventions, result.json and runs.jsonl
(`records`), CSV and JSON tables (`files`), the runs table the fits read (`table`)
and the runs that look wrong (`anomalies`)."""
