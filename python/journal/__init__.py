"""The journal: immutable numbered entries, the stream state each carries, and the time index over them."""
