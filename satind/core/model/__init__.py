"""The core's data: what a peer knows, as plain objects with no rules and no I/O.

Every table a core handler reads or changes lives here (custody of stolen jobs, orphans and
kept results, shared-object bookkeeping, iterative scheduling, SPMD entities), so the state
aggregate (``core/state.py``) is built from data only and sits below every rule that
annotates with it. The rules are the modules above (``core/*.py``, ``recovery/``).
"""

from __future__ import annotations

# A job's name in the core's tables: (run id, path). The same name can be given out twice
# (an old epoch's copy and a new one's: core/custody.py), so it keys records, not jobs.
JobKey = tuple[str, bytes]
