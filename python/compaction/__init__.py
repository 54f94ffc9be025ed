"""Compaction: small chunks of a segment become macro-chunks, what they replace is collected,
and the macro map is rebuilt."""
