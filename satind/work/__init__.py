"""The work both sides of a peer share, as plain data: jobs and their ids (``jobs.py``), the
work queue (``workqueue.py``), the events the network side posts to the compute side
(``events.py``) and the errors that cross peers (``errors.py``).

It sits below both the protocol core (``satind/core``, the trio thread's decisions) and the
compute side (``satind/engine``, the compute thread): each imports it, neither imports the
other. ``jobs.py`` and ``workqueue.py`` are on the spawn/sync hot path and compiled with mypyc
(setup.py ``HOT``).
"""
