"""The client side of satind: the Python API (``api``: async, trio; ``sync``: for scripts and
notebooks; ``errors``; ``submission``: what a submission carries), and the connection and
files they are made of. docs/client.md is the guide. ``satind.connect`` and the rest are
these modules' names, imported when first used (satind/__init__.py); typed, for mypy:
``from satind.client.sync import connect``."""
