"""Figures: the canvas every figure is saved through (PNG and SVG) and the law's
figures (IsoFLOP profiles, N*(C) and D*(C), loss contours)."""
