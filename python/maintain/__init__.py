"""Keeping a stream healthy: retention, checking every object a read may open (fsck), and
repairing what the journal determines."""
