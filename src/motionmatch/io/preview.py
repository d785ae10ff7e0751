"""Preview videos and trajectory plots of motion, rendered off-screen with matplotlib.

:func:`render_preview` draws a stick figure (bones between the joints of
``motion.world_positions``), planted feet, the ground, and desired/actual root
trajectories, frame by frame, into a ``.gif`` (Pillow) or ``.mp4`` (the ffmpeg binary
that ships with the ``imageio-ffmpeg`` package). The ground is the floor at ``y = 0`` (a
grey grid) or a terrain's surface, shaded, with the grid lying on it
(:mod:`motionmatch.io.preview_ground`). :func:`plot_trajectories` writes a top-down PNG
of root paths.

Speed: the scene is projected to 2D by our own camera (perspective or orthographic) and
drawn on one plain 2D matplotlib axes whose artists are created once and updated with
``set_data``/``set_segments`` every frame (a terrain's geometry is made once per grid
rectangle and only projected; its surface is one quad mesh); the output is subsampled to
at most 30 fps by default. Matplotlib's 3D toolkit is not used: it is several times
slower per frame.

matplotlib (and Pillow, which it depends on) and imageio-ffmpeg are optional: they are
imported only when a function here runs, and a missing one is reported by name
(:class:`MissingDependencyError`). Install them with ``pip install 'motionmatch[viz]'``.

Files are written atomically: frames go to a temporary file beside the target, which is
renamed onto it only once complete, so a failed render leaves no partial file.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from motionmatch._files import atomic_path
from motionmatch.errors import MotionMatchError

if TYPE_CHECKING:
    from motionmatch.anim.contacts import FootContacts
    from motionmatch.anim.motion import Motion
    from motionmatch.environment.terrain import Terrain
    from motionmatch.io.preview_ground import PreviewGround

__all__ = [
    "MAX_DEFAULT_FPS",
    "SUPPORTED_FORMATS",
    "MissingDependencyError",
    "output_frame_indices",
    "plot_trajectories",
    "render_preview",
]

#: File suffixes :func:`render_preview` can write, and what writes them.
SUPPORTED_FORMATS = {".gif": "Pillow", ".mp4": "imageio-ffmpeg"}
#: The output frame rate is ``min(motion.fps, MAX_DEFAULT_FPS)`` unless ``fps`` is given.
MAX_DEFAULT_FPS = 30.0

_LEFT = (0.16, 0.38, 0.85)
_RIGHT = (0.86, 0.27, 0.18)
_CENTRE = (0.15, 0.15, 0.18)
_DESIRED = (0.95, 0.55, 0.05)
_ACTUAL = (0.10, 0.55, 0.75)
_CONTACT = (0.10, 0.70, 0.25)
_GRID = (0.80, 0.80, 0.82)
_GROUND_LINES = (0.20, 0.24, 0.16, 0.35)


class MissingDependencyError(MotionMatchError, ImportError):
    """An optional package that a function needs is not installed."""


def _require(module: str, package: str, purpose: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(
            f"{purpose} needs the {package!r} package, which is not installed; "
            f"install it with `pip install {package}` or `pip install 'motionmatch[viz]'`"
        ) from e


def _check_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_FORMATS:
        raise ValueError(
            f"cannot write a preview to {str(path)!r}: unsupported file type {path.suffix or '(none)'!r}; "
            f"use one of {', '.join(SUPPORTED_FORMATS)}"
        )
    return suffix


def output_frame_indices(num_frames: int, motion_fps: float, out_fps: float) -> NDArray[np.int64]:
    """Source frames shown in a preview at ``out_fps``: frame ``k`` of the output shows
    the source frame nearest to time ``k / out_fps``, for ``floor(num_frames * out_fps /
    motion_fps)`` output frames (at least one)."""
    n_out = max(1, math.floor(num_frames * out_fps / motion_fps + 1e-9))
    idx = np.rint(np.arange(n_out) * (motion_fps / out_fps)).astype(np.int64)
    return np.minimum(idx, num_frames - 1)


# -------------------------------------------------------------------------- the camera
class _Camera:
    """A look-at camera: a fixed viewing direction (azimuth, elevation), a target that
    may move, perspective or orthographic projection onto ``[-aspect, aspect] x [-1, 1]``."""

    def __init__(self, projection: str, azimuth_deg: float, elevation_deg: float, fov_deg: float):
        if projection not in ("perspective", "orthographic"):
            raise ValueError(f"projection must be 'perspective' or 'orthographic', got {projection!r}")
        self.perspective = projection == "perspective"
        az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
        # Unit vector from the target to the eye.
        self.back = np.array([math.cos(el) * math.sin(az), math.sin(el), math.cos(el) * math.cos(az)])
        fwd = -self.back
        right = np.cross(fwd, [0.0, 1.0, 0.0])
        n = np.linalg.norm(right)
        right = right / n if n > 1e-9 else np.array([1.0, 0.0, 0.0])
        up = np.cross(right, fwd)
        self.basis = np.stack([right, up, fwd])  # rows: screen x, screen y, depth
        self.tan_half = math.tan(math.radians(fov_deg) / 2)
        self.distance = 5.0  # perspective: eye-target distance (m)
        self.half_height = 1.5  # orthographic: half the visible height (m)
        self.eye = self.back * self.distance
        self.near = 0.05

    def set_target(self, target: NDArray) -> None:
        dist = self.distance if self.perspective else 1000.0
        self.eye = np.asarray(target, dtype=np.float64) + self.back * dist

    def to_camera(self, p: NDArray) -> NDArray:
        return (p - self.eye) @ self.basis.T

    def screen(self, c: NDArray) -> NDArray:
        """Camera-space points ``[..., 3]`` to screen ``[..., 2]`` (NaN behind the camera)."""
        if self.perspective:
            z = c[..., 2:3]
            with np.errstate(divide="ignore", invalid="ignore"):
                s = c[..., :2] / (np.where(z > self.near, z, np.nan) * self.tan_half)
            return s
        return c[..., :2] / self.half_height

    def project(self, p: NDArray) -> NDArray:
        return self.screen(self.to_camera(p))

    def project_segments(self, a: NDArray, b: NDArray) -> NDArray:
        """World segments ``a[i] -> b[i]`` to screen ``[N, 2, 2]``, clipped at the near plane."""
        ca, cb = self.to_camera(a), self.to_camera(b)
        if self.perspective:
            za, zb = ca[:, 2:3], cb[:, 2:3]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (self.near * 1.001 - za) / (zb - za)
            cut = ca + t * (cb - ca)
            ca = np.where(za < self.near, cut, ca)
            cb = np.where(zb < self.near, cut, cb)
        return np.stack([self.screen(ca), self.screen(cb)], axis=1)


# ------------------------------------------------------------------------ scene setup
def _nice_spacing(length: float) -> float:
    choices = np.array([0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0])
    return float(choices[np.argmin(np.abs(np.log(choices / max(length, 1e-3))))])


def _as_trajectory(x: ArrayLike | None, name: str, num_frames: int) -> NDArray | None:
    if x is None:
        return None
    a = np.asarray(x, dtype=np.float64)
    if a.ndim not in (2, 3) or a.shape[-1] != 3 or a.shape[0] != num_frames:
        raise ValueError(f"{name} must have shape [F, 3] or [F, K, 3] with F = {num_frames} (the motion's frames), "
                         f"got {list(a.shape)}")
    a = a.copy()
    a[..., 1] = 0.0  # drawn on the ground
    return a


def _bone_list(motion: Motion) -> tuple[NDArray, NDArray, list[tuple[float, float, float]]]:
    from motionmatch.anim.root import find_hips, side_of

    skel = motion.skeleton
    hips = find_hips(skel)
    child, parent, colours = [], [], []
    for j in range(1, skel.num_joints):
        p = int(skel.parents[j])
        if p == 0 and hips != 0:
            continue  # bones from a root bone above the hips (e.g. LAFAN1's SimulationBone) are not drawn
        side = side_of(skel.names[j])
        child.append(j)
        parent.append(p)
        colours.append(_LEFT if side == "L" else _RIGHT if side == "R" else _CENTRE)
    return np.array(child, dtype=np.int64), np.array(parent, dtype=np.int64), colours


def _default_contacts(motion: Motion, terrain: Terrain | None = None) -> FootContacts | None:
    """The feet's contacts found from their height above the ground (``terrain``'s under
    each foot, else ``y = 0``) and their speed; ``None`` when the skeleton has no feet."""
    from motionmatch.anim.contacts import find_feet, foot_contacts
    from motionmatch.errors import SkeletonError

    try:
        if terrain is None:
            return foot_contacts(motion)
        feet = find_feet(motion.skeleton)
        xz = motion.world_positions[:, feet][..., [0, 2]]
        return foot_contacts(motion, feet, ground_height=terrain.heights(xz.reshape(-1, 2)).reshape(xz.shape[:2]))
    except SkeletonError:
        return None


# ------------------------------------------------------------------------- the renderer
class _Renderer:
    """Creates the figure and artists once; :meth:`draw` updates them for one frame and
    returns the RGB image ``[H, W, 3]`` uint8."""

    def __init__(
        self,
        motion: Motion,
        *,
        size: tuple[int, int],
        dpi: float,
        camera: str,
        projection: str,
        azimuth: float,
        elevation: float,
        fov: float,
        desired: NDArray | None,
        actual: NDArray,
        contacts: FootContacts | None,
        shown: NDArray,
        title: str | None,
        terrain: Terrain | None = None,
    ):
        _require("matplotlib", "matplotlib", "render_preview")
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import LineCollection
        from matplotlib.figure import Figure

        if camera not in ("follow", "fixed"):
            raise ValueError(f"camera must be 'follow' or 'fixed', got {camera!r}")
        self.motion = motion
        self.wp = motion.world_positions
        self.width, self.height = size
        self.aspect = self.width / self.height
        self.follow = camera == "follow"
        self.desired = desired
        self.actual = actual
        self.shown = shown
        self.title = title
        self.child, self.parent, colours = _bone_list(motion)
        if contacts is not None:
            self.feet = np.asarray(contacts.joints, dtype=np.int64)
            self.contacts = np.asarray(contacts.contacts, dtype=bool)
            if self.contacts.shape != (motion.num_frames, len(self.feet)):
                raise ValueError(f"contacts must be [F, K] = [{motion.num_frames}, {len(self.feet)}], "
                                 f"got {list(self.contacts.shape)}")
        else:
            self.feet, self.contacts = np.zeros(0, dtype=np.int64), None

        # Size of the character: its height (above the ground), or its length for a long, low animal.
        wp = self.wp
        from motionmatch.anim.root import find_hips

        hips_joint = find_hips(motion.skeleton)
        top = wp[:, :, 1].max(axis=1)
        self.ground: PreviewGround | None = None
        if terrain is not None:
            from motionmatch.io.preview_ground import PreviewGround

            top = top - terrain.heights(wp[:, hips_joint][:, [0, 2]])
        tall = np.percentile(top, 95)
        long = np.percentile(np.ptp(wp[:, :, [0, 2]], axis=1).max(axis=1), 95)
        self.scale = float(max(tall, long, 0.3))
        self.spacing = _nice_spacing(self.scale / 3)
        if terrain is not None:
            self.ground = PreviewGround(terrain, self.spacing)
            if desired is not None:
                self.desired = desired = self.ground.on_ground(desired)
            self.actual = actual = self.ground.on_ground(actual)

        self.cam = _Camera(projection, azimuth, elevation, fov)
        target_y = 0.45 * self.scale
        if self.follow:
            from scipy.ndimage import uniform_filter1d

            hips = wp[:, hips_joint].copy()
            win = max(1, round(0.5 * motion.fps))
            hips = uniform_filter1d(hips, size=win, axis=0, mode="nearest")
            if self.ground is None:
                hips[:, 1] = target_y
            else:  # the ground's height under the character, smoothed as its path is
                under = uniform_filter1d(self.ground.heights(hips[:, [0, 2]]), size=win, mode="nearest")
                hips[:, 1] = under + target_y
            self.targets = hips
            self.cam.distance = 1.1 * self.scale / self.cam.tan_half
            self.cam.half_height = 1.1 * self.scale
        else:
            content = [wp[shown].reshape(-1, 3)]
            for t in (desired, actual):
                if t is not None:
                    content.append(t[shown].reshape(-1, 3))
            pts = np.concatenate(content)
            lo, hi = pts[:, [0, 2]].min(axis=0), pts[:, [0, 2]].max(axis=0)
            centre = np.array([(lo[0] + hi[0]) / 2, target_y, (lo[1] + hi[1]) / 2])
            if self.ground is not None:  # the ground under the content: its middle height
                under = self.ground.heights(pts[:: max(1, len(pts) // 20000), [0, 2]])
                centre[1] += (float(under.min()) + float(under.max())) / 2
            self.targets = np.broadcast_to(centre, (motion.num_frames, 3))
            self._fit_fixed(pts, centre)
            self.grid_lo, self.grid_hi = lo - self.scale, hi + self.scale

        # Figure and artists.
        fig = Figure(figsize=(self.width / dpi, self.height / dpi), dpi=dpi, facecolor="white")
        self.canvas = FigureCanvasAgg(fig)
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        ax.set_axis_off()
        ax.set_xlim(-self.aspect, self.aspect)
        ax.set_ylim(-1.0, 1.0)
        ax.set_autoscale_on(False)
        lw = 2.2 * self.height / 480
        self.grid = LineCollection([], colors=[_GRID if self.ground is None else _GROUND_LINES],
                                   linewidths=0.8 * self.height / 480, zorder=1)
        self.ax = ax
        self.surface: Any = None  # a terrain's quad mesh, made anew each frame (see _draw_ground)
        self._colours_drawn: NDArray | None = None
        self._rgba = np.zeros((0, 4))
        self.shadow = LineCollection([], colors=[(0.0, 0.0, 0.0, 0.18)], linewidths=lw, zorder=2)
        self.bones = LineCollection([], colors=colours, linewidths=lw, capstyle="round", zorder=5)
        for c in (self.grid, self.shadow, self.bones):
            ax.add_collection(c)
        (self.actual_line,) = ax.plot([], [], "-", color=_ACTUAL, lw=0.8 * lw, zorder=3)
        (self.actual_now,) = ax.plot([], [], "o", color=_ACTUAL, ms=2.5 * lw, zorder=3)
        (self.desired_path,) = ax.plot([], [], "--", color=_DESIRED, lw=0.7 * lw, alpha=0.8, zorder=4)
        (self.desired_now,) = ax.plot([], [], "o-", color=_DESIRED, lw=0.7 * lw, ms=2.2 * lw, zorder=4)
        (self.joints,) = ax.plot([], [], "o", color=_CENTRE, ms=1.3 * lw, zorder=6)
        (self.contact_marks,) = ax.plot([], [], "o", color=_CONTACT, ms=3.2 * lw, zorder=7)
        self.label = ax.text(0.015, 0.975, "", transform=ax.transAxes, ha="left", va="top",
                             family="monospace", fontsize=9 * self.height / 480, zorder=10)
        self.fig = fig

    def _fit_fixed(self, pts: NDArray, centre: NDArray) -> None:
        """Distance (perspective) or scale (orthographic) that keeps every point in view."""
        cam = self.cam
        cam.half_height = 1.3 * self.scale
        cam.distance = 1.3 * self.scale / cam.tan_half
        if len(pts) > 20000:
            pts = pts[:: len(pts) // 20000 + 1]
        cam.set_target(centre)
        if not cam.perspective:
            c = cam.to_camera(pts)
            cam.half_height = max(cam.half_height, 1.1 * float(max(np.abs(c[:, 1]).max(),
                                                                    np.abs(c[:, 0]).max() / self.aspect)))
            return
        for _ in range(60):
            cam.set_target(centre)
            s = cam.project(pts)
            if np.all(np.isfinite(s)) and np.all(np.abs(s[:, 0]) <= 0.92 * self.aspect) and np.all(
                np.abs(s[:, 1]) <= 0.92
            ):
                return
            cam.distance *= 1.15

    def _grid_rectangle(self, target: NDArray) -> tuple[NDArray, NDArray]:
        """``(lo [2], hi [2])``: the ground (x, z) the grid covers, on grid lines."""
        sp = self.spacing
        if self.follow:
            half = math.ceil(4.0 * self.scale / sp) * sp
            cx, cz = round(target[0] / sp) * sp, round(target[2] / sp) * sp
            return np.array([cx - half, cz - half]), np.array([cx + half, cz + half])
        return np.floor(self.grid_lo / sp) * sp, np.ceil(self.grid_hi / sp) * sp

    def _grid_segments(self, target: NDArray) -> tuple[NDArray, NDArray]:
        sp = self.spacing
        lo, hi = self._grid_rectangle(target)
        xs = np.arange(lo[0], hi[0] + sp / 2, sp)
        zs = np.arange(lo[1], hi[1] + sp / 2, sp)
        a = np.concatenate([np.stack([xs, np.zeros_like(xs), np.full_like(xs, lo[1])], 1),
                            np.stack([np.full_like(zs, lo[0]), np.zeros_like(zs), zs], 1)])
        b = np.concatenate([np.stack([xs, np.zeros_like(xs), np.full_like(xs, hi[1])], 1),
                            np.stack([np.full_like(zs, hi[0]), np.zeros_like(zs), zs], 1)])
        return a, b

    def _draw_ground(self, target: NDArray) -> None:
        """The terrain's shaded surface and its grid lines on it (the geometry made once per
        grid rectangle; here only projected)."""
        from matplotlib.collections import QuadMesh

        cam, ground = self.cam, self.ground
        if ground is None:
            return
        lines, ends, surface, colours = ground.ground(*self._grid_rectangle(target), cam.basis[2])
        if colours is not self._colours_drawn:
            self._colours_drawn = colours
            self._rgba = np.concatenate([colours, np.ones((len(colours), 1))], axis=1)
        self.grid.set_segments(np.split(cam.project(lines), ends))  # NaN (not drawn) behind the camera
        q = cam.project(surface)
        rgba = self._rgba
        seen = np.isfinite(q).all(axis=-1)
        if not seen.all():  # a quad reaching behind the camera (off screen): transparent
            q = np.where(seen[..., None], q, 0.0)
            rgba = rgba.copy()
            rgba[~(seen[:-1, :-1] & seen[1:, :-1] & seen[:-1, 1:] & seen[1:, 1:]).ravel(), 3] = 0.0
        mesh = QuadMesh(q, antialiased=False, edgecolors="none", linewidth=0.0, zorder=0.5)
        mesh.set_facecolor(rgba)
        if self.surface is not None:
            self.surface.remove()
        self.surface = self.ax.add_collection(mesh, autolim=False)

    def pixels(self, k: int, points: NDArray) -> NDArray:
        """``[..., 2]``: where world ``points [..., 3]`` are drawn in output frame ``k``, as
        (column, row) pixels of its image (row 0 at the top; NaN behind the camera)."""
        self.cam.set_target(self.targets[int(self.shown[k])])
        s = self.cam.project(np.asarray(points, dtype=np.float64))
        return np.stack([(s[..., 0] + self.aspect) / (2 * self.aspect) * self.width,
                         (1.0 - s[..., 1]) / 2 * self.height], axis=-1)

    def draw(self, k: int) -> NDArray[np.uint8]:
        """Render output frame ``k`` (source frame ``shown[k]``)."""
        f = int(self.shown[k])
        cam = self.cam
        cam.set_target(self.targets[f])
        if self.ground is None:
            self.grid.set_segments(cam.project_segments(*self._grid_segments(self.targets[f])))
        else:
            self._draw_ground(self.targets[f])

        pose = self.wp[f]
        self.bones.set_segments(cam.project_segments(pose[self.child], pose[self.parent]))
        if self.ground is None:
            flat = pose.copy()
            flat[:, 1] = 0.0
        else:
            flat = self.ground.on_ground(pose)
        self.shadow.set_segments(cam.project_segments(flat[self.child], flat[self.parent]))
        used = np.unique(np.concatenate([self.child, self.parent]))
        js = cam.project(pose[used])
        self.joints.set_data(js[:, 0], js[:, 1])
        if self.contacts is not None and len(self.feet):
            planted = self.feet[self.contacts[f]]
            cs = cam.project(pose[planted]).reshape(-1, 2)
            self.contact_marks.set_data(cs[:, 0], cs[:, 1])

        a = cam.project(self.actual[self.shown[: k + 1]])
        self.actual_line.set_data(a[:, 0], a[:, 1])
        self.actual_now.set_data(a[-1:, 0], a[-1:, 1])
        if self.desired is not None:
            if self.desired.ndim == 3:  # [F, K, 3]: the points wanted from this frame on
                d = cam.project(self.desired[f])
                self.desired_now.set_data(d[:, 0], d[:, 1])
            else:  # [F, 3]: one whole desired path, and where it is now
                d = cam.project(self.desired[self.shown])
                self.desired_path.set_data(d[:, 0], d[:, 1])
                self.desired_now.set_data(d[k : k + 1, 0], d[k : k + 1, 1])

        t = f / self.motion.fps
        head = f"{self.title}\n" if self.title else ""
        self.label.set_text(f"{head}t = {t:6.2f} s   frame {f + 1}/{self.motion.num_frames}")
        self.canvas.draw()
        buf = np.asarray(self.canvas.buffer_rgba())
        return np.ascontiguousarray(buf[:, :, :3])

    def close(self) -> None:
        self.fig.clear()


# --------------------------------------------------------------------------- writers
def _gif_durations_ms(n: int, fps: float) -> list[int]:
    """Per-frame GIF delays: GIF counts in hundredths of a second, so 30 fps becomes
    30, 30, 40 ms ... adding up to the right total instead of drifting."""
    cs = np.rint(np.arange(n + 1) * (100.0 / fps)).astype(np.int64)
    return [int(v) * 10 for v in np.maximum(np.diff(cs), 2)]


def _write_gif(frames: Iterator[NDArray[np.uint8]], tmp: Path, fps: float) -> None:
    image = _require("PIL.Image", "Pillow", "writing a .gif preview")
    images = []
    for rgb in frames:
        images.append(image.fromarray(rgb, "RGB").quantize(colors=255, method=image.Quantize.FASTOCTREE))
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                   duration=_gif_durations_ms(len(images), fps), loop=0, optimize=False, disposal=1)


def _write_mp4(frames: Iterator[NDArray[np.uint8]], tmp: Path, fps: float, size: tuple[int, int]) -> None:
    iio_ffmpeg = _require("imageio_ffmpeg", "imageio-ffmpeg", "writing an .mp4 preview")
    from fractions import Fraction

    writer = iio_ffmpeg.write_frames(
        str(tmp), size, fps=Fraction(fps).limit_denominator(1001), codec="libx264", pix_fmt_in="rgb24",
        pix_fmt_out="yuv420p", quality=7, macro_block_size=2, ffmpeg_log_level="error",
        output_params=["-preset", "veryfast", "-f", "mp4", "-movflags", "+faststart"],
    )
    writer.send(None)
    try:
        for rgb in frames:
            writer.send(rgb)
    finally:
        writer.close()  # waits for ffmpeg to finish the file
    if tmp.stat().st_size == 0:
        raise OSError(f"ffmpeg wrote nothing to {tmp}")


# ------------------------------------------------------------------------ public API
def render_preview(
    motion: Motion,
    path: str | Path,
    *,
    desired_trajectory: ArrayLike | None = None,
    actual_trajectory: ArrayLike | None = None,
    fps: float | None = None,
    size: tuple[int, int] = (640, 480),
    camera: str = "follow",
    projection: str = "perspective",
    azimuth: float = 35.0,
    elevation: float = 22.0,
    fov: float = 40.0,
    progress: bool = True,
    contacts: FootContacts | None = None,
    title: str | None = None,
    dpi: float = 100.0,
    terrain: Terrain | None = None,
) -> Path:
    """Render a stick-figure video of ``motion`` to ``path`` (``.gif`` or ``.mp4``).

    Each output frame shows the skeleton's bones (left side blue, right red, centre dark;
    bones hanging from a ground-level root bone such as LAFAN1's ``SimulationBone`` are
    left out), its shadow on the ground, planted feet as green dots, a ground grid, the
    actual root trajectory travelled so far (blue) and the desired trajectory (orange),
    with the time and frame number in the corner. On a ``terrain`` its surface is drawn,
    coloured by height (green-grey low, sand high) and hill-shaded by slope, with the grid
    lines, the shadow and both trajectories lying on it; the camera keeps the ground under
    the character in view.

    Args:
        motion: the clip (``world_positions`` and ``skeleton.parents`` are drawn).
        path: the output file; ``.gif`` is written with Pillow, ``.mp4`` (H.264) with the
            ffmpeg binary bundled with ``imageio-ffmpeg``. Written atomically. GIF frames
            are held in memory until the file is written (about 0.3 MB per 640 x 480
            frame) and GIF files are large: prefer ``.mp4`` for clips longer than a few
            seconds.
        desired_trajectory: ``[F, K, 3]`` points wanted at each frame (e.g. a controller's
            predicted future positions; drawn as connected dots) or ``[F, 3]`` one desired
            path (drawn dashed, with the point of the current frame); metres, drawn on
            the ground (y is ignored: the ground's height under each point).
        actual_trajectory: ``[F, 3]`` the root's path (metres, on the ground: y is
            ignored); by default the hips projected to the ground.
        fps: output frame rate; default ``min(motion.fps, 30)``; never above
            ``motion.fps``. Output frame ``k`` shows the source frame nearest ``k / fps``
            (see :func:`output_frame_indices`).
        size: ``(width, height)`` in pixels (rounded down to even numbers, as H.264 needs).
        camera: ``"follow"`` keeps the character (smoothed hips) centred, looking from a
            fixed direction; ``"fixed"`` frames the whole clip from one place.
        projection: ``"perspective"`` (field of view ``fov`` degrees, vertical) or
            ``"orthographic"`` (an oblique parallel view).
        azimuth, elevation: viewing direction in degrees: the camera sits at azimuth
            ``0`` on the +Z side (in front of a character facing +Z), ``90`` on the +X
            side; elevation above the ground plane.
        progress: show a tqdm progress bar over output frames.
        contacts: foot contact labels to mark; by default
            :func:`motionmatch.anim.contacts.foot_contacts` (heights above ``terrain``;
            none when the skeleton has no recognisable feet).
        title: an optional line shown above the time label.
        dpi: figure resolution (fonts and lines scale with ``size`` regardless).
        terrain: the ground the motion was played on
            (:class:`~motionmatch.environment.terrain.Terrain`, e.g. a scenario's
            ``.terrain``); ``None`` or a flat ground: the floor at ``y = 0``, the same video
            as without it.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        ValueError: an unsupported suffix, arrays of the wrong shape, or a ``terrain``
            that is not a ``Terrain``.
        MissingDependencyError: matplotlib, Pillow or imageio-ffmpeg is missing.
    """
    from tqdm.auto import tqdm

    path = Path(path)
    fmt = _check_format(path)
    if fmt == ".mp4":
        _require("imageio_ffmpeg", "imageio-ffmpeg", "writing an .mp4 preview")
    else:
        _require("PIL.Image", "Pillow", "writing a .gif preview")
    _require("matplotlib", "matplotlib", "render_preview")
    width, height = (int(size[0]) // 2 * 2, int(size[1]) // 2 * 2)
    if width < 16 or height < 16:
        raise ValueError(f"size must be at least 16 x 16 pixels, got {tuple(size)}")
    out_fps = min(motion.fps, MAX_DEFAULT_FPS) if fps is None else min(float(fps), motion.fps)
    if not (np.isfinite(out_fps) and out_fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps}")
    from motionmatch.io.preview_ground import check_terrain

    ground = check_terrain(terrain)
    F = motion.num_frames
    desired = _as_trajectory(desired_trajectory, "desired_trajectory", F)
    actual = _as_trajectory(actual_trajectory, "actual_trajectory", F)
    if actual is not None and actual.ndim != 2:
        raise ValueError(f"actual_trajectory must have shape [F, 3], got {list(actual.shape)}")
    if actual is None:
        from motionmatch.anim.root import find_hips

        actual = motion.world_positions[:, find_hips(motion.skeleton)].copy()
        actual[:, 1] = 0.0
    if contacts is None:
        contacts = _default_contacts(motion, ground)
    shown = output_frame_indices(F, motion.fps, out_fps)

    renderer = _Renderer(
        motion, size=(width, height), dpi=dpi, camera=camera, projection=projection, azimuth=azimuth,
        elevation=elevation, fov=fov, desired=desired, actual=actual, contacts=contacts, shown=shown, title=title,
        terrain=ground,
    )

    def frames() -> Iterator[NDArray[np.uint8]]:
        with tqdm(total=len(shown), desc=f"preview {path.name}", unit="frame", disable=not progress) as bar:
            for k in range(len(shown)):
                img = renderer.draw(k)
                if img.shape != (height, width, 3):
                    raise RuntimeError(f"rendered frame is {img.shape[1]}x{img.shape[0]}, expected {width}x{height}")
                yield img
                bar.update()

    try:
        with atomic_path(path) as tmp:
            if fmt == ".gif":
                _write_gif(frames(), tmp, out_fps)
            else:
                _write_mp4(frames(), tmp, out_fps, (width, height))
    finally:
        renderer.close()
    return path


def plot_trajectories(
    png_path: str | Path,
    trajectories: Mapping[str, ArrayLike] | Sequence[ArrayLike] | ArrayLike,
    *,
    paths: Mapping[str, ArrayLike] | None = None,
    title: str | None = None,
    size: tuple[int, int] = (800, 800),
    dpi: float = 100.0,
) -> Path:
    """Write a top-down PNG of root trajectories on the ground plane.

    Seen from above (+Y), with +X to the right and +Z pointing down the page, so turns
    keep their handedness. Each trajectory gets its own colour, a dot where it starts and
    a cross where it ends; axes are in metres with equal scale.

    Args:
        png_path: the output ``.png`` (written atomically).
        trajectories: ``{label: [F, 3]}``, a list of ``[F, 3]`` arrays, or one ``[F, 3]``
            array (metres; y is ignored).
        paths: ``{label: [P, 3]}`` reference polylines (e.g. the desired path), drawn dashed.
        title: figure title.
        size: ``(width, height)`` in pixels.
        dpi: figure resolution.

    Returns:
        ``png_path`` as a ``Path``.
    """
    _require("matplotlib", "matplotlib", "plot_trajectories")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from motionmatch._files import atomic_write

    png_path = Path(png_path)
    if png_path.suffix.lower() != ".png":
        raise ValueError(f"plot_trajectories writes PNG files; {str(png_path)!r} does not end in .png")
    if isinstance(trajectories, Mapping):
        items: list[tuple[str | None, Any]] = list(trajectories.items())
    elif isinstance(trajectories, (list, tuple)) and trajectories and all(np.ndim(t) == 2 for t in trajectories):
        items = [(f"#{i}", t) for i, t in enumerate(trajectories)]
    else:
        items = [(None, trajectories)]
    fig = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for label, p in (paths or {}).items():
        q = np.asarray(p, dtype=np.float64).reshape(-1, 3)
        ax.plot(q[:, 0], q[:, 2], "--", color="0.45", lw=1.5, label=label, zorder=1)
    for i, (label, t) in enumerate(items):
        q = np.asarray(t, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] != 3 or len(q) == 0:
            raise ValueError(f"trajectory {label or i} must have shape [F, 3], got {list(q.shape)}")
        colour = f"C{i % 10}"
        ax.plot(q[:, 0], q[:, 2], "-", color=colour, lw=1.8, label=label, zorder=2)
        ax.plot(q[:1, 0], q[:1, 2], "o", color=colour, ms=6, zorder=3)
        ax.plot(q[-1:, 0], q[-1:, 2], "x", color=colour, ms=8, mew=2, zorder=3)
    ax.set_aspect("equal", adjustable="datalim")
    ax.invert_yaxis()  # +Z down the page: a true view from above with +X to the right
    ax.set_xlabel("x (m)")
    ax.set_ylabel("z (m)")
    ax.grid(True, color="0.9")
    if title:
        ax.set_title(title)
    if any(label is not None for label, _ in items) or paths:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    with atomic_write(png_path, "wb") as f:
        fig.savefig(f, format="png", dpi=dpi)
    return png_path
