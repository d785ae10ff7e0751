"""Getting motion out: preview videos and plots (:mod:`motionmatch.io.preview`).

The preview functions need the optional ``viz`` extra (matplotlib, imageio-ffmpeg);
importing this package does not.
"""

from motionmatch.io.preview import MissingDependencyError, plot_trajectories, render_preview

__all__ = ["MissingDependencyError", "plot_trajectories", "render_preview"]
