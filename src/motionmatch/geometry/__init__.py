"""Planar geometry shared by the environment and the penalised search: packed obstacle
rows, signed distances between ellipses and obstacles, and the uniform grid that finds
the obstacles near a point."""
