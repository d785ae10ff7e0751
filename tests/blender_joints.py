"""Joint world positions of the armatures in a GLB/FBX file, as Blender imports and poses them.

Run by the round-trip tests in a Python that has ``bpy`` (``$MOTIONMATCH_BLENDER_PYTHON``)::

    python tests/blender_joints.py FILE FPS FRAME [FRAME ...]

prints ``{armature name: {bone name: [[x, y, z] per frame]}}`` as JSON on the last line of
stdout, in metres, Y up (Blender's Z-up world turned back: ``(x, z, -y)``). The scene's
frame rate is set to FPS before importing, and motion frame ``i`` is evaluated at the
frame where Blender's importer put time ``i / FPS``.
"""

from __future__ import annotations

import json
import sys

import bpy


def main(path: str, fps: float, frames: list[int]) -> dict:
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    rate = max(1, round(fps))
    scene.render.fps, scene.render.fps_base = rate, rate / fps
    if path.lower().endswith(".fbx"):
        bpy.ops.import_scene.fbx(filepath=path, anim_offset=0.0)
    else:
        bpy.ops.import_scene.gltf(filepath=path)
    out = {}
    arms = [o for o in scene.objects if o.type == "ARMATURE"]
    # the first keyed frame is the motion's frame 0 (importers differ in where they start)
    starts = [o.animation_data.action.frame_range[0] for o in arms if o.animation_data and o.animation_data.action]
    first = min(starts) if starts else 0.0
    for f in frames:
        whole = first + f
        scene.frame_set(int(whole // 1), subframe=float(whole % 1))
        for arm in arms:
            bones = out.setdefault(arm.name, {})
            for pb in arm.pose.bones:
                x, y, z = arm.matrix_world @ pb.head
                bones.setdefault(pb.name, []).append([x, z, -y])
    return out


if __name__ == "__main__":
    result = main(sys.argv[1], float(sys.argv[2]), [int(a) for a in sys.argv[3:]])
    print(json.dumps(result))
