"""Reconfigurable iterative SPMD runs (mpi-ios-reconfigurable-iterative-apps): the gain of a
migration (gain.py); the runtime that places and moves entities comes with issue 17."""
