"""Approach 2: IsoFLOP profiles, one minimum per budget, N*(C) through them, with
its bootstrap, its local noise model and its lack-of-fit check."""
