"""What Blender makes of a GLB/FBX file: its armatures' joint world positions and its
meshes' deformed vertices at given frames, as Blender imports and poses them.

Run by the round-trip tests in a Python that has ``bpy`` (``$MOTIONMATCH_BLENDER_PYTHON``)::

    python tests/blender_joints.py FPS FRAME,FRAME,... [--mesh] FILE [FILE ...]

prints ``{FILE: {"joints": {armature: {bone: [[x, y, z] per frame]}}, "meshes": {object:
[[[x, y, z] per vertex] per frame]}}}`` as JSON on the last line of stdout (one Blender
start for several files), in metres, Y up
(Blender's Z-up world turned back: ``(x, z, -y)``); meshes only with ``--mesh``. The
scene's frame rate is set to FPS before importing, and motion frame ``i`` is evaluated
``i`` frames after the first keyed frame (importers differ in where they start). A glTF
file's animations (one per character) all play at once.
"""

from __future__ import annotations

import json
import sys

import bpy
import numpy as np


def _y_up(points: np.ndarray) -> list:
    return np.stack([points[:, 0], points[:, 2], -points[:, 1]], axis=1).round(7).tolist()


def main(path: str, fps: float, frames: list[int], meshes: bool) -> dict:
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    rate = max(1, round(fps))
    scene.render.fps, scene.render.fps_base = rate, rate / fps
    if path.lower().endswith(".fbx"):
        bpy.ops.import_scene.fbx(filepath=path, anim_offset=0.0)
    else:
        bpy.ops.import_scene.gltf(filepath=path)
    for obj in scene.objects:  # glTF: one animation per character, the first active, the others NLA tracks
        anim = obj.animation_data
        if anim is not None and anim.action is None and len(anim.nla_tracks) and len(anim.nla_tracks[0].strips):
            strip = anim.nla_tracks[0].strips[0]
            anim.action = strip.action
            if getattr(strip, "action_slot", None) is not None:
                anim.action_slot = strip.action_slot
    arms = [o for o in scene.objects if o.type == "ARMATURE"]
    starts = [o.animation_data.action.frame_range[0] for o in arms if o.animation_data and o.animation_data.action]
    first = min(starts) if starts else 0.0
    out: dict = {"joints": {}, "meshes": {}}
    for f in frames:
        whole = first + f
        scene.frame_set(int(whole // 1), subframe=float(whole % 1))
        for arm in arms:
            bones = out["joints"].setdefault(arm.name, {})
            for pb in arm.pose.bones:
                x, y, z = arm.matrix_world @ pb.head
                bones.setdefault(pb.name, []).append([x, z, -y])
        if meshes:
            graph = bpy.context.evaluated_depsgraph_get()
            for obj in scene.objects:
                if obj.type != "MESH":
                    continue
                ev = obj.evaluated_get(graph)
                me = ev.to_mesh()
                co = np.empty(len(me.vertices) * 3, dtype=np.float32)
                me.vertices.foreach_get("co", co)
                ev.to_mesh_clear()
                mw = np.array(obj.matrix_world)
                world = co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3]
                out["meshes"].setdefault(obj.name, []).append(_y_up(world))
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--mesh"]
    fps, frames = float(args[0]), [int(a) for a in args[1].split(",")]
    print(json.dumps({path: main(path, fps, frames, "--mesh" in sys.argv) for path in args[2:]}))
