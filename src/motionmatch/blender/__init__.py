"""motionmatch in Blender: an add-on (operators and a sidebar panel) over the motionmatch library.

In Blender, with an armature that has an action selected (3D view sidebar, tab
"motionmatch"):

- **GenMM**: new actions synthesized from the armature's action (length, seed, variants,
  loop; optionally the poses at the timeline markers pinned at the same frames) —
  :class:`operators.MOTIONMATCH_OT_genmm`;
- **Import**: any motionmatch output — BVH (with a mannequin body made for its skeleton),
  GLB, FBX, USD (their bodies are in the file) — :class:`operators.MOTIONMATCH_OT_import`;
- **Follow curve**: a character walking along a selected curve object as a drawn path,
  timed by its length and a speed, by motion matching on a database file chosen in the
  panel (the Python API of ``motionmatch follow``) — :class:`operators.MOTIONMATCH_OT_follow_curve`.

It needs motionmatch installed into Blender's own Python (``<blender python> -m pip install
motionmatch``). ``motionmatch blender-addon -o motionmatch_addon.zip`` builds the zip that
Blender installs (Edit > Preferences > Add-ons > Install from Disk): this package with a
``blender_manifest.toml`` (Blender 4.2+ extensions) and ``bl_info`` (legacy add-ons).
Scripts and tests register it directly: ``motionmatch.blender.register()``.

Nothing here imports ``bpy`` until :func:`register` runs, so the package imports anywhere.
"""

from __future__ import annotations

bl_info = {
    "name": "motionmatch",
    "author": "motionmatch developers",
    "version": (0, 1, 0),
    "blender": (4, 2, 0),
    "location": "View3D > Sidebar > motionmatch",
    "description": "GenMM on an armature's action, motion matching along a curve, import of motionmatch files",
    "category": "Animation",
}

_CLASSES: list = []


def register() -> None:
    """Register the operators, the panel and the scene settings (``scene.motionmatch``)."""
    try:
        import motionmatch.genmm  # noqa: F401  (the library, not this add-on)
    except ImportError as e:
        raise ImportError(f"the motionmatch add-on needs the motionmatch package in Blender's Python ({e}); "
                          "install it with `<blender's python> -m pip install motionmatch`") from None
    import bpy

    from . import operators, panel

    _CLASSES[:] = [panel.MotionMatchSettings, operators.MOTIONMATCH_OT_genmm, operators.MOTIONMATCH_OT_import,
                   operators.MOTIONMATCH_OT_follow_curve, panel.MOTIONMATCH_PT_panel]
    for cls in _CLASSES:
        bpy.utils.register_class(cls)
    bpy.types.Scene.motionmatch = bpy.props.PointerProperty(type=panel.MotionMatchSettings)
    bpy.types.TOPBAR_MT_file_import.append(operators.menu_import)


def unregister() -> None:
    import bpy

    from . import operators

    bpy.types.TOPBAR_MT_file_import.remove(operators.menu_import)
    del bpy.types.Scene.motionmatch
    for cls in reversed(_CLASSES):
        bpy.utils.unregister_class(cls)
    _CLASSES.clear()
