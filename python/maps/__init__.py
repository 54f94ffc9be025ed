"""Sharded maps beside the journal that a read or a group needs at O(1) cost: sealed segments,
macro-chunks, consumer groups."""
