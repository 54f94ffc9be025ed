"""The read path: plan a ``_tso`` range into chunk reads (window, end, tasks) and read them as Arrow batches."""
