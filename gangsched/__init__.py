"""gangsched: a gang scheduler for Kubernetes.

The public surface is deliberately small: the `gangsched` command (simulate, run, explain) and
`gangsched.core` for programs that want to drive the scheduling core directly.
"""

__version__ = "0.1.0"
