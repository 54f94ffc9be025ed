"""The write path: route and stamp records into chunk files, re-route past a scale, and fold
written chunks into a commit."""
