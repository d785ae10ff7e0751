"""The add-on, headless: register it, import a BVH with Blender's own importer, run the GenMM
operator on its action (two variants; then one more with a timeline marker's pose pinned),
and report what came out; then (optional) its Import operator on a BVH and its Walk along
curve operator on a circle. Run by ``tests/test_blender.py`` in a Python that has ``bpy``::

    python tests/blender_addon_check.py EXAMPLE.bvh OTHER.bvh [IMPORT.bvh DATABASE.npz]

prints JSON on the last line of stdout: the example's frame count and rate, each new action's
name and frame count, its coverage of the example and local patch distance to it
(motionmatch.metrics.genmm), the same of OTHER (a control that does not come from the example), the largest rotation
difference at the marker's frame between the outputs and the example's pose there, and
between the two variants. With IMPORT and DATABASE also: what ``motionmatch.import_motion``
made of IMPORT (its objects, and its bones' world positions at the first, middle and last
frames, Y up) and what ``motionmatch.follow_curve`` made on a Bezier circle (radius 3 m,
speed 1.3 m/s, DATABASE): its result, the walker's frame count, the circle's length and
the walker's root (joint 0) on the ground at every frame (x, z; Y up).
"""

from __future__ import annotations

import json
import sys

import bpy
import numpy as np


def main(example: str, other: str) -> dict:
    import motionmatch.blender
    from motionmatch.anim import load_bvh
    from motionmatch.io import blender_scene as bs
    from motionmatch.metrics.genmm import coverage, local_patch_distance

    bpy.ops.wm.read_factory_settings(use_empty=True)
    motionmatch.blender.register()
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 30, 1.0
    # Blender's own BVH importer (centimetres -> metres), resampled to the scene's 30 fps
    bpy.ops.import_anim.bvh(filepath=example, global_scale=0.01, use_fps_scale=True, frame_start=1)
    arm = bpy.context.active_object
    source = bs.read_motion(arm)
    s = scene.motionmatch
    s.length_s, s.seed, s.variants, s.loop, s.use_markers = 3.0, 0, 2, False, False
    before = set(bpy.data.actions.keys())
    result = bpy.ops.motionmatch.genmm()
    made = [bpy.data.actions[n] for n in sorted(set(bpy.data.actions.keys()) - before)]
    outputs = [bs.read_motion(arm, a) for a in made]
    assigned = arm.animation_data.action.name
    # keyframes from the timeline markers: the action's pose at the marker, pinned there
    marker = 1 + 20
    scene.timeline_markers.new("key", frame=marker)
    original = bpy.data.actions[source.name]
    arm.animation_data.action = original
    arm.animation_data.action_slot = original.slots[0]
    keyed = bpy.ops.motionmatch.genmm(seed=5, variants=1, use_markers=True)
    pinned = bs.read_motion(arm, bpy.data.actions[f"{source.name}_genmm_5"])
    control = load_bvh(other)
    control = control[slice(0, None, max(1, round(control.fps / source.fps)))]
    control = control.with_data(control.rotations, control.translations, fps=source.fps)
    return {
        "result": sorted(result), "keyed_result": sorted(keyed),
        "source_frames": source.num_frames, "fps": source.fps,
        "assigned": assigned,
        "actions": [{"name": a.name, "frames": m.num_frames, "range": list(a.frame_range),
                     "coverage": coverage([source], m), "local_patch_distance": local_patch_distance([source], m)}
                    for a, m in zip(made, outputs)],
        "control_coverage": coverage([source], control),
        "control_local_patch_distance": local_patch_distance([source], control),
        "marker_rotation_error_rad": float(np.max(2 * np.arccos(np.clip(np.abs(np.sum(
            pinned.rotations[marker - 1] * source.rotations[marker - 1], axis=-1)), 0, 1)))),
        "variants_differ_rad": float(np.max(2 * np.arccos(np.clip(np.abs(np.sum(
            outputs[0].rotations * outputs[-1].rotations, axis=-1)), 0, 1)))),
    }


def import_and_follow(path: str, database: str) -> dict:
    """The Import and Walk along curve operators (after :func:`main`, in its scene)."""
    from motionmatch.blender import operators
    from motionmatch.io import blender_scene as bs

    scene = bpy.context.scene
    before = set(bpy.data.objects.keys())
    imported = bpy.ops.motionmatch.import_motion(filepath=path)
    made = sorted((o.name, o.type) for o in bpy.data.objects if o.name not in before)
    arm = next(bpy.data.objects[n] for n, t in made if t == "ARMATURE")
    lo, hi = (round(f) for f in arm.animation_data.action.frame_range)
    joints: dict = {}
    for f in (lo, lo + (hi - lo + 1) // 2, hi):  # motion frames 0, n // 2, n - 1
        scene.frame_set(f)
        for pb in arm.pose.bones:
            x, y, z = arm.matrix_world @ pb.head
            joints.setdefault(pb.name, []).append([x, z, -y])
    bpy.ops.object.select_all(action="DESELECT")
    bpy.ops.curve.primitive_bezier_circle_add(radius=3.0, location=(0.0, 0.0, 0.0))
    curve = bpy.context.active_object
    xz = operators.curve_points(bpy.context, curve)
    followed = bpy.ops.motionmatch.follow_curve(database=database, speed=1.3)
    walker = bpy.data.objects.get(f"{curve.name}_walker")
    out = {"import_result": sorted(imported), "import_objects": made, "import_frames": [lo, hi],
           "import_joints": joints, "follow_result": sorted(followed), "fps": scene.render.fps / scene.render.fps_base,
           "curve_length": float(np.linalg.norm(np.diff(np.r_[xz, xz[:1]], axis=0), axis=1).sum())}
    if walker is not None and walker.type == "ARMATURE":
        walked = bs.read_motion(walker)
        out["walker_frames"] = walked.num_frames
        out["walker_root_xz"] = walked.world_positions[:, 0][:, [0, 2]].round(4).tolist()
    return out


if __name__ == "__main__":
    report = main(sys.argv[1], sys.argv[2])
    if len(sys.argv) > 4:
        report.update(import_and_follow(sys.argv[3], sys.argv[4]))
    print(json.dumps(report))
