"""Self-adaptivity (satin-grid-programming-model §4.5): what each peer measures
(``measure.py``) and what the coordinator decides from it (``coordinator.py``); the node's
service that samples and acts is ``node/adapt.py``."""
