"""The Python API: the ``Stream`` facade and the parts it composes, one job each, plus scans and consumer groups."""
