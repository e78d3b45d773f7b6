"""Developer tooling shared by tests/ and bench/: starting, waiting for and stopping the real
processes they run beside a local control plane.

Kept out of the `gangsched` package (pyproject ships only gangsched*), so none of it reaches
the wheel or the image, and out of tests/ so that bench/ does not import test code.
"""
