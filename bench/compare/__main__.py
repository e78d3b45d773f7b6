"""`python -m bench.compare`: see bench/compare/__init__.py."""

from bench.compare.main import main

main()
