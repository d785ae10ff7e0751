"""Top-down pictures and videos of scenes: obstacles, body ellipses, root paths, stick figures.

Seen from above (+Y) with +X to the right and +Z up the page. Obstacles are grey (darker
when they have no height range), bodies are ellipses (red while they intersect something),
target paths dashed; a terrain (:mod:`motionmatch.environment.terrain`) is a shaded
relief under them, with contour lines every :data:`CONTOUR_M` metres. matplotlib is needed (``pip install 'motionmatch[viz]'``); ``.mp4``
needs imageio-ffmpeg, ``.gif`` Pillow. Files are written atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from motionmatch._files import atomic_path
from motionmatch.geometry.shapes import C_P, C_Q, C_TYPE, C_UX, C_UZ, C_X, C_YMAX, C_Z, T_BOX

__all__ = ["plot_scene", "render_scene"]

#: metres between the contour lines of a terrain
CONTOUR_M = 0.25
#: samples a side of a terrain's shaded relief
RELIEF_SAMPLES = 300

_COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def _outline(row: np.ndarray, n: int = 40) -> np.ndarray:
    """``[n, 2]`` outline (x, z) of a packed obstacle row."""
    ux, uz = row[C_UX], row[C_UZ]
    vx, vz = -uz, ux
    p, q = row[C_P], row[C_Q]
    if int(row[C_TYPE]) == T_BOX:
        loc = np.array([[p, q], [p, -q], [-p, -q], [-p, q], [p, q]])
    else:
        t = np.linspace(0, 2 * np.pi, n)
        loc = np.stack([p * np.cos(t), q * np.sin(t)], axis=1)
    return np.stack([row[C_X] + loc[:, 0] * ux + loc[:, 1] * vx, row[C_Z] + loc[:, 0] * uz + loc[:, 1] * vz], axis=1)


def _ellipse_outline(e: np.ndarray, n: int = 32) -> np.ndarray:
    t = np.linspace(0, 2 * np.pi, n)
    ux, uz, a, b = e[2], e[3], e[4], e[5]
    x = a * np.cos(t)
    y = b * np.sin(t)
    return np.stack([e[0] + x * ux - y * uz, e[1] + x * uz + y * ux], axis=1)


def _figure(size, dpi):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_axes([0.06, 0.06, 0.9, 0.88])
    ax.set_aspect("equal")
    return fig, ax


def _draw_obstacles(ax, rows: np.ndarray, artists=None):
    out = []
    for m, row in enumerate(rows):
        o = _outline(row)
        color = "#555555" if not np.isfinite(row[C_YMAX]) else "#999999"
        if artists is None:
            (ln,) = ax.fill(o[:, 0], o[:, 1], color=color, alpha=0.6, lw=0)
            out.append(ln)
        else:
            artists[m].set_xy(o)
    return out


def _draw_terrain(ax, terrain) -> None:
    """A shaded relief of ``terrain`` over the axes' limits (lit from the north-west), its
    contour lines every :data:`CONTOUR_M` m, under everything else; nothing for flat ground."""
    if terrain is None or terrain.is_flat:
        return
    from matplotlib import colormaps
    from matplotlib.colors import LightSource

    (x0, x1), (z0, z1) = ax.get_xlim(), ax.get_ylim()
    gx, gz = np.meshgrid(np.linspace(x0, x1, RELIEF_SAMPLES), np.linspace(z0, z1, RELIEF_SAMPLES))
    h = terrain.heights(np.stack([gx.ravel(), gz.ravel()], axis=1)).reshape(gx.shape)
    lo, hi = float(h.min()), float(h.max())
    ls = LightSource(azdeg=315, altdeg=40)
    rgb = ls.shade(h, cmap=colormaps["summer"], vmin=lo - 0.5, vmax=hi + 0.5, blend_mode="soft",
                   dx=(x1 - x0) / (RELIEF_SAMPLES - 1), dy=(z1 - z0) / (RELIEF_SAMPLES - 1), vert_exag=3.0)
    ax.imshow(rgb, extent=(x0, x1, z0, z1), origin="lower", zorder=0, interpolation="bilinear")
    if hi - lo >= CONTOUR_M:
        levels = np.arange(np.ceil(lo / CONTOUR_M), np.floor(hi / CONTOUR_M) + 1) * CONTOUR_M
        ax.contour(gx, gz, h, levels=levels, colors="#3d4a2a", linewidths=0.4, alpha=0.6, zorder=0.5)
    ax.set_xlim(x0, x1)
    ax.set_ylim(z0, z1)


def _limits(ax, rows, tracks, pad=1.0):
    pts = [tracks.reshape(-1, tracks.shape[-1])[:, :2]]
    for r in rows:
        pts.append(_outline(r))
    p = np.concatenate(pts)
    p = p[np.all(np.isfinite(p), axis=1)]
    lo, hi = p.min(axis=0) - pad, p.max(axis=0) + pad
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])


def plot_scene(png_path: str | Path, rows: np.ndarray, tracks: np.ndarray, *, paths: Sequence | None = None,
               names: Sequence[str] | None = None, every: float = 0.5, fps: float = 60.0,
               inside: np.ndarray | None = None, title: str | None = None, size=(900, 900), dpi: float = 100.0,
               bounds: tuple | None = None, terrain=None) -> Path:
    """A top-down PNG: obstacle rows ``[M, ROW]``, body ellipse tracks ``[A, F, 8]`` (drawn
    every ``every`` seconds, red where ``inside [A, F]``), root paths, target ``paths``, on
    the ``terrain`` (a :class:`~motionmatch.environment.terrain.Terrain`: its relief)."""
    fig, ax = _figure(size, dpi)
    _draw_obstacles(ax, rows)
    tracks = np.asarray(tracks)
    A, F = tracks.shape[:2]
    step = max(1, round(every * fps))
    for i in range(A):
        col = _COLORS[i % len(_COLORS)]
        ax.plot(tracks[i, :, 0], tracks[i, :, 1], color=col, lw=1.0, label=names[i] if names else None)
        for f in range(0, F, step):
            o = _ellipse_outline(tracks[i, f])
            red = inside is not None and inside[i, f]
            ax.plot(o[:, 0], o[:, 1], color="red" if red else col, lw=0.6, alpha=0.8)
    for p in paths or []:
        if p is not None:
            p = np.asarray(p)
            ax.plot(p[:, 0], p[:, 1], "--", color="#ff7f0e", lw=0.8)
    if bounds is not None:
        ax.set_xlim(bounds[0][0], bounds[1][0])
        ax.set_ylim(bounds[0][1], bounds[1][1])
    else:
        _limits(ax, rows, tracks)
    _draw_terrain(ax, terrain)
    if title:
        ax.set_title(title)
    if names and A <= 8:
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("z (m)")
    path = Path(png_path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp)
    return path


def render_scene(out_path: str | Path, rows_at, tracks: np.ndarray, *, skeletons: np.ndarray | None = None,
                 parents: np.ndarray | None = None, fps: float = 60.0, out_fps: float = 30.0,
                 paths: Sequence | None = None, inside: np.ndarray | None = None, size=(720, 720),
                 dpi: float = 100.0, title: str | None = None, progress: bool = False, terrain=None) -> Path:
    """A top-down video (``.mp4`` or ``.gif``) of a run.

    Args:
        rows_at: ``t -> [M, ROW]`` obstacles at time ``t`` (or a fixed ``[M, ROW]`` array).
        tracks: ``[A, F, 8]`` body ellipses per agent and frame.
        skeletons: ``[A, F, J, 3]`` world joint positions (drawn top-down), optional.
        parents: ``[J]`` joint parents, with ``skeletons``.
        inside: ``[A, F]`` bool, bodies drawn red while intersecting.
        terrain: the ground (:class:`~motionmatch.environment.terrain.Terrain`), drawn as
            a shaded relief with contour lines; ``None``: none.
    """
    from tqdm import tqdm

    out = Path(out_path)
    suffix = out.suffix.lower()
    if suffix not in (".mp4", ".gif"):
        raise ValueError(f"{out}: the preview must be a .mp4 or .gif file")
    static = not callable(rows_at)
    rows0 = np.asarray(rows_at) if static else rows_at(0.0)
    fig, ax = _figure(size, dpi)
    obs_art = _draw_obstacles(ax, rows0)
    tracks = np.asarray(tracks)
    A, F = tracks.shape[:2]
    _limits(ax, rows0, tracks)
    _draw_terrain(ax, terrain)
    for p in paths or []:
        if p is not None:
            p = np.asarray(p)
            ax.plot(p[:, 0], p[:, 1], "--", color="#ff7f0e", lw=0.8)
    trails = [ax.plot([], [], color=_COLORS[i % len(_COLORS)], lw=0.8)[0] for i in range(A)]
    bodies = [ax.plot([], [], color=_COLORS[i % len(_COLORS)], lw=1.5)[0] for i in range(A)]
    from matplotlib.collections import LineCollection

    bones = LineCollection([], colors="#222222", linewidths=1.0)
    ax.add_collection(bones)
    label = ax.text(0.02, 0.97, "", transform=ax.transAxes, va="top", fontsize=9)
    if title:
        ax.set_title(title)
    step = fps / out_fps
    frames = np.minimum(np.rint(np.arange(int(F / step)) * step).astype(int), F - 1)
    if len(frames) == 0:
        frames = np.array([0])
    w, h = fig.canvas.get_width_height()

    def images():
        for f in tqdm(frames, desc="rendering", unit="frame", disable=not progress):
            t = f / fps
            if not static:
                _draw_obstacles(ax, rows_at(t), obs_art)
            segs = []
            for i in range(A):
                trails[i].set_data(tracks[i, : f + 1, 0], tracks[i, : f + 1, 1])
                o = _ellipse_outline(tracks[i, f])
                bodies[i].set_data(o[:, 0], o[:, 1])
                bodies[i].set_color("red" if inside is not None and inside[i, f] else _COLORS[i % len(_COLORS)])
                if skeletons is not None and parents is not None:
                    sk = skeletons[i, f]
                    segs.extend([[sk[j, [0, 2]], sk[parents[j], [0, 2]]] for j in range(2, len(parents))
                                 if parents[j] >= 1])
            bones.set_segments(segs)
            label.set_text(f"t = {t:5.2f} s")
            fig.canvas.draw()
            yield np.asarray(fig.canvas.buffer_rgba())[:, :, :3].copy()

    with atomic_path(out) as tmp:
        if suffix == ".mp4":
            import imageio_ffmpeg

            writer = imageio_ffmpeg.write_frames(str(tmp), (w, h), fps=out_fps, macro_block_size=2, quality=7)
            writer.send(None)
            for img in images():
                writer.send(np.ascontiguousarray(img))
            writer.close()
        else:
            from PIL import Image

            imgs = [Image.fromarray(i) for i in images()]
            imgs[0].save(tmp, save_all=True, append_images=imgs[1:], duration=int(1000 / out_fps), loop=0)
    return out
