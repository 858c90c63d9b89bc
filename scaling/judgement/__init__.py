"""The judgement of fits: checks of intervals and of Approach 3, the backtest, the
caveats (which approach to read, do they agree, the headline). It judges the
approaches' outputs; no approach imports it."""
