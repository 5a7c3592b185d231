"""Iterative master-worker runs on volatile workers (scheduling-iterative-apps-volatile-resources):
the availability model (model.py), the paper's scheduling heuristics (heuristics.py) and the
discrete-time simulator of its study (platform.py, slots.py, study.py)."""
