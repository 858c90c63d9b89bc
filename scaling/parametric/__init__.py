"""Approach 3: L(N, D) = E + A/N^alpha + B/D^beta by a Huber loss of log-loss
residuals, its variable-projection and multistart solvers, and its bootstrap."""
