"""The add-on's operators: GenMM on an armature's action, import of motionmatch files, and
motion matching along a curve. Each reads its settings from ``scene.motionmatch`` unless
called with its own values (``bpy.ops.motionmatch.genmm(variants=3)``)."""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np
from bpy_extras.io_utils import ImportHelper

from motionmatch.io import blender_scene as bs

IMPORT_SUFFIXES = (".bvh", ".glb", ".gltf", ".fbx", ".usd", ".usda", ".usdc")


def _setting(op: bpy.types.Operator, context, name: str):
    """The operator's own value if given, else the scene's setting."""
    return getattr(op, name) if op.properties.is_property_set(name) else getattr(context.scene.motionmatch, name)


def _active_action(obj):
    if obj is None or obj.type != "ARMATURE":
        return None
    anim = obj.animation_data
    return anim.action if anim is not None else None


class MOTIONMATCH_OT_genmm(bpy.types.Operator):
    """Generate new actions from the active armature's action with GenMM (generative motion matching)"""

    bl_idname = "motionmatch.genmm"
    bl_label = "Generate (GenMM)"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012  (Blender reads a set)

    length_s: bpy.props.FloatProperty(name="Length (s)", default=10.0, min=0.1)
    seed: bpy.props.IntProperty(name="Seed", default=0, min=0)
    variants: bpy.props.IntProperty(name="Variants", default=1, min=1)
    loop: bpy.props.BoolProperty(name="Loop", default=False)
    use_markers: bpy.props.BoolProperty(name="Keyframes from markers", default=True)

    @classmethod
    def poll(cls, context):
        return _active_action(context.active_object) is not None

    def execute(self, context):
        from motionmatch.errors import MotionMatchError
        from motionmatch.genmm import GenMM, Keyframes

        obj = context.active_object
        action = _active_action(obj)
        try:
            motion = bs.read_motion(obj, action)
            start = round(action.frame_range[0])
            frames = max(2, round(_setting(self, context, "length_s") * motion.fps))
            keys = None
            if _setting(self, context, "use_markers"):
                at = sorted({m.frame - start for m in context.scene.timeline_markers
                             if 0 <= m.frame - start < min(motion.num_frames, frames)})
                if at:
                    keys = Keyframes.from_motion(motion, at, frames=at)
            gen = GenMM([motion])
            seed, count = _setting(self, context, "seed"), _setting(self, context, "variants")
            made = []
            for i in range(count):
                res = gen.sample(frames, seed=seed + i, loop=_setting(self, context, "loop"), keyframes=keys)
                made.append(bs.write_action(obj, res.motion, name=f"{action.name}_genmm_{seed + i}", start=start,
                                            assign=False))
        except (MotionMatchError, ValueError) as e:
            self.report({"ERROR"}, " ".join(str(e).split()))
            return {"CANCELLED"}
        obj.animation_data.action = made[0]
        if hasattr(made[0], "slots") and len(made[0].slots):
            obj.animation_data.action_slot = made[0].slots[0]
        context.scene.frame_end = max(context.scene.frame_end, start + frames - 1)
        self.report({"INFO"}, f"GenMM: {len(made)} new action(s) of {frames} frames: {', '.join(a.name for a in made)}"
                    + (f", {len(keys.frames)} key pose(s) from markers" if keys is not None else ""))
        return {"FINISHED"}


class MOTIONMATCH_OT_import(bpy.types.Operator, ImportHelper):
    """Import a motionmatch output: BVH (with a mannequin body for its skeleton), GLB, FBX or USD"""

    bl_idname = "motionmatch.import_motion"
    bl_label = "Import motionmatch motion"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012  (Blender reads a set)

    filter_glob: bpy.props.StringProperty(default=";".join(f"*{s}" for s in IMPORT_SUFFIXES), options={"HIDDEN"})

    def execute(self, context):
        from motionmatch.errors import MotionMatchError

        path = Path(self.filepath)
        suffix = path.suffix.lower()
        if suffix not in IMPORT_SUFFIXES:
            self.report({"ERROR"}, f"{path.name}: motionmatch imports {', '.join(IMPORT_SUFFIXES)} files")
            return {"CANCELLED"}
        if suffix in (".glb", ".gltf"):
            return bpy.ops.import_scene.gltf(filepath=str(path))
        if suffix == ".fbx":
            return bpy.ops.import_scene.fbx(filepath=str(path), anim_offset=0.0)
        if suffix != ".bvh":
            return bpy.ops.wm.usd_import(filepath=str(path))
        try:
            import_bvh(context, path)
        except (MotionMatchError, OSError, ValueError) as e:
            self.report({"ERROR"}, " ".join(str(e).split()))
            return {"CANCELLED"}
        return {"FINISHED"}


def import_bvh(context, path: Path):
    """A BVH file as an armature with its action and a mannequin body; the scene takes its
    frame rate when it has no other animation. Returns the armature object."""
    from motionmatch.anim import load_bvh
    from motionmatch.anim.mannequin import mannequin_for

    motion = load_bvh(path)
    scene = context.scene
    if not any(o.animation_data and o.animation_data.action for o in scene.objects):
        bs.set_scene_fps(scene, motion.fps)
    arm, _ = bs.build_character(motion, mesh=mannequin_for(motion), name=path.stem, start=scene.frame_start)
    scene.frame_end = max(scene.frame_end, scene.frame_start + motion.num_frames - 1)
    return arm


def menu_import(self, context):
    self.layout.operator(MOTIONMATCH_OT_import.bl_idname, text="motionmatch (.bvh/.glb/.fbx/.usd)")


_DATABASES: dict = {}


def _database(path: str):
    from motionmatch.database import MotionDatabase

    p = Path(bpy.path.abspath(path))
    key = (str(p), p.stat().st_mtime if p.is_file() else None)
    if key not in _DATABASES:
        _DATABASES.clear()
        _DATABASES[key] = MotionDatabase.load(p)
    return _DATABASES[key]


def curve_points(context, curve) -> np.ndarray:
    """``[P, 2]`` ground points (x, z; metres, Y up) along a curve object's first spline, in order."""
    graph = context.evaluated_depsgraph_get()
    ev = curve.evaluated_get(graph)
    me = ev.to_mesh()
    try:
        co = np.empty(len(me.vertices) * 3, dtype=np.float64)
        me.vertices.foreach_get("co", co)
    finally:
        ev.to_mesh_clear()
    mw = np.array(curve.matrix_world)
    world = co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3]
    xz = bs.from_blender(world)[:, [0, 2]]
    keep = np.r_[True, np.linalg.norm(np.diff(xz, axis=0), axis=1) > 1e-6]
    return xz[keep]


class MOTIONMATCH_OT_follow_curve(bpy.types.Operator):
    """Make a character walk along the active curve object by motion matching (timed by the curve's length and a speed)"""

    bl_idname = "motionmatch.follow_curve"
    bl_label = "Walk along curve"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012  (Blender reads a set)

    database: bpy.props.StringProperty(name="Database", subtype="FILE_PATH")
    speed: bpy.props.FloatProperty(name="Speed (m/s)", default=1.4, min=0.1)

    @classmethod
    def poll(cls, context):
        return context.active_object is not None and context.active_object.type == "CURVE"

    def execute(self, context):
        from motionmatch.anim.mannequin import mannequin_for
        from motionmatch.control.path import TimedPath
        from motionmatch.errors import MotionMatchError
        from motionmatch.runtime.follow import FollowSettings, PathFollower, run_followers

        curve = context.active_object
        db_path = _setting(self, context, "database")
        if not db_path:
            self.report({"ERROR"}, "choose a motion database (.npz, made by `motionmatch build`) in the panel")
            return {"CANCELLED"}
        try:
            xz = curve_points(context, curve)
            if len(xz) < 2:
                raise MotionMatchError(f"curve {curve.name!r} has no length")
            length = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(xz, axis=0), axis=1))]
            times = length / _setting(self, context, "speed")
            db = _database(db_path)
            path = TimedPath.from_samples(times, xz)
            scene = context.scene
            fps = scene.render.fps / scene.render.fps_base
            follower = PathFollower(db, path, FollowSettings(mode="global"), position=(xz[0, 0], 0.0, xz[0, 1]),
                                    name=f"{curve.name}_walker")
            rec = run_followers([follower], fps=fps)[0]
            bs.build_character(rec.motion, mesh=mannequin_for(rec.motion), name=f"{curve.name}_walker",
                               start=scene.frame_start)
        except (MotionMatchError, OSError, ValueError) as e:
            self.report({"ERROR"}, " ".join(str(e).split()))
            return {"CANCELLED"}
        scene.frame_end = max(scene.frame_end, scene.frame_start + rec.motion.num_frames - 1)
        self.report({"INFO"}, f"walked {length[-1]:.1f} m along {curve.name!r} in {rec.motion.num_frames} frames "
                    f"({'completed' if rec.completed else 'NOT completed'})")
        return {"FINISHED"}
