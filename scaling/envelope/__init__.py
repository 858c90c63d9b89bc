"""Approach 1 of Hoffmann et al. (2022): the envelope of the training curves."""
