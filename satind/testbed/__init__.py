"""A testbed of machines on one host: each machine a Linux network namespace with its own IP
on a bridge and its own loopback, each running a real `satind start` daemon with the shipped
defaults on ``0.0.0.0:7420``, and the faults machines meet (crash, restart, stop, pause,
partition, throttle), each one call. ``python -m satind.testbed up 4 --peers 2`` makes one
for people; tests get one from the ``testbed`` fixture (tests/testbed/conftest.py).

It needs root (CAP_NET_ADMIN) and pyroute2 (``pip install 'satind[testbed]'``); nothing else
in satind imports it. docs/testbed.md says how to use it.
"""

from __future__ import annotations

from satind.testbed.machines import PORT as PORT
from satind.testbed.machines import Machine as Machine
from satind.testbed.machines import Testbed as Testbed
from satind.testbed.network import TestbedUnavailable as TestbedUnavailable
from satind.testbed.network import unavailable as unavailable
