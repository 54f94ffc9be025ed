"""Chunk files: how a Parquet chunk is encoded (per-column choices) and how its string dictionaries are read."""
