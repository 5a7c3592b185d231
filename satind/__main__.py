"""``python -m satind`` is the ``satind`` command."""

from satind.cli import main

main()
