"""motionmatch: data-driven character animation by motion matching."""

__version__ = "0.1.0"
