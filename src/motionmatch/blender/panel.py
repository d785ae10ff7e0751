"""The add-on's settings (``scene.motionmatch``) and its panel in the 3D view's sidebar."""

from __future__ import annotations

import bpy


class MotionMatchSettings(bpy.types.PropertyGroup):
    """What the operators use unless called with other values."""

    length_s: bpy.props.FloatProperty(name="Length (s)", default=10.0, min=0.1, soft_max=120.0,
                                      description="Length of each generated motion, seconds")
    seed: bpy.props.IntProperty(name="Seed", default=0, min=0, description="Seed of the first variant")
    variants: bpy.props.IntProperty(name="Variants", default=1, min=1, soft_max=20,
                                    description="How many motions to generate (seeds seed, seed + 1, ...)")
    loop: bpy.props.BoolProperty(name="Loop", default=False, description="Make each generated motion loop")
    use_markers: bpy.props.BoolProperty(
        name="Keyframes from markers", default=True,
        description="Pin the action's pose at each timeline marker (inside the action) at the same frame of the output")
    database: bpy.props.StringProperty(name="Database", subtype="FILE_PATH", default="",
                                       description="A motion database (.npz) built by `motionmatch build`")
    speed: bpy.props.FloatProperty(name="Speed (m/s)", default=1.4, min=0.1, soft_max=8.0,
                                   description="Walking speed along the curve: its length / speed is the path's time")


class MOTIONMATCH_PT_panel(bpy.types.Panel):
    bl_label = "motionmatch"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "motionmatch"

    def draw(self, context):
        s = context.scene.motionmatch
        col = self.layout.column()
        col.label(text="GenMM from the active armature's action")
        for prop in ("length_s", "seed", "variants", "loop", "use_markers"):
            col.prop(s, prop)
        col.operator("motionmatch.genmm", icon="ARMATURE_DATA")
        col.separator()
        col.label(text="Follow the active curve")
        col.prop(s, "database")
        col.prop(s, "speed")
        col.operator("motionmatch.follow_curve", icon="CURVE_PATH")
        col.separator()
        col.operator("motionmatch.import_motion", icon="IMPORT")
