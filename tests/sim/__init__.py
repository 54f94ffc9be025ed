"""A deterministic simulation of every actor on one tstream store (``tests/test_simulation.py``).

:mod:`.scheduler` runs real tstream code in actor threads, one at a time, switching only at
store calls, with the clock, ids and faults drawn from one seed; :mod:`.actors` are the actors
(writers, first writes, the sink, compaction, vacuum, truncation, scaling, readers); :mod:`.world`
runs a seed and checks the invariants (:mod:`.history`: along the journal, writer expiry);
:mod:`.knobs` lowers the product's checkpoint thresholds for a profile and turns its buggify
knobs; :mod:`.cloud` makes the store fail as Azure or GCS does, :mod:`.mount` commit through a
FUSE mount's claims.
"""
