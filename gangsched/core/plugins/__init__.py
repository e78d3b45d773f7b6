"""Filter and score plugins, one module each, assembled into a Framework by `build_framework`."""

from gangsched.core.plugins.registry import ScoringConfig, build_framework

__all__ = ["ScoringConfig", "build_framework"]
