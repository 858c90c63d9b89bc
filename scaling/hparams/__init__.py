"""Hyperparameter laws: an LR x batch grid's runs, each point's optimum, the laws
eta*(N, D) and B*(D), hparams.json, its plots and text, and the rules recipes read."""
