"""Where work off a commit's critical path runs: in the background (the default) or in line.

One fact, read from the environment (:data:`UPKEEP_ENV`), for every such piece of work: the
retention and compaction after ``Stream.append``
(:mod:`~pyspark_tstream.api.upkeep`), and the head hint a commit leaves with the listing of
others' published requests beside its data write (:mod:`~pyspark_tstream.journal.hints`,
:mod:`~pyspark_tstream.write.group`). Tests ask for in line where they count store calls or
inject crashes at the n-th call (``tests/conftest.py``).
"""

from __future__ import annotations

import os

from .errors import ConfigError

#: The environment variable that chooses where work off the commit's critical path runs: one
#: of :data:`MODES` (unset: ``background``).
UPKEEP_ENV = "TSTREAM_UPKEEP"
#: Its values: ``background`` (the default) or ``inline`` (in the committing call).
MODES = ("background", "inline")


def inline_from_env() -> bool:
    """Whether :data:`UPKEEP_ENV` asks for in-line upkeep; a ConfigError naming it for another value."""
    text = os.environ.get(UPKEEP_ENV, "").strip()
    mode = text.lower() or MODES[0]
    if mode not in MODES:
        raise ConfigError(f"{UPKEEP_ENV}={text!r} is not one of {', '.join(MODES)}: set it to 'inline' to run "
                          "retention, compaction and the head hint in the committing call, or unset it "
                          "(background)", option=UPKEEP_ENV, value=text)
    return mode == "inline"
