"""The planner: N*, D* and loss for a budget, with unique-data limits and inference
cost, its text, the extrapolation flags and forecasts scored against a run."""
