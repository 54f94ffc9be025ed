"""Epochs: which segments hold which keys when, and the scale commits that seal and split them."""
