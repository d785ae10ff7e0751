"""Your own takes: BVH files and folders loaded for building, viewing and synthesis.

:func:`load_takes` is what ``motionmatch build``, ``viewer --data`` and ``genmm`` read
files with: the unit and up axis of each file found from the data (or as given), each
take put on the ground (:func:`motionmatch.anim.grounding.ground`: one line saying by how
much), implausible takes warned about (:func:`motionmatch.anim.plausible.humanoid_warnings`),
and takes of one rig brought to one skeleton (:func:`fit_skeletons`). Every message is a
:class:`~motionmatch.errors.DataWarning`, one line each.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from motionmatch.anim import Motion, load_bvh
from motionmatch.anim.grounding import ground
from motionmatch.anim.humanoid import HumanoidError, find_humanoid
from motionmatch.anim.plausible import humanoid_warnings
from motionmatch.anim.rig_edit import drop_joints, in_joint_order, rooted_at
from motionmatch.datasets.folder import load_folder, tags_from_name
from motionmatch.errors import DatasetError, DataWarning

__all__ = ["fit_skeletons", "load_takes", "one_skeleton", "prepare_take", "skeleton_groups"]


def _say(message: str) -> None:
    warnings.warn(message, DataWarning, stacklevel=3)


def prepare_take(motion: Motion, *, put_on_ground: bool = True) -> Motion:
    """One take made ready: put on the ground (saying by how much) and checked (warnings)."""
    grounded = False
    if put_on_ground:
        motion, moved = ground(motion)
        if moved:
            name = str(motion.source) if motion.source else motion.name
            _say(f"{name}: put on the ground: moved {'up' if moved > 0 else 'down'} {abs(moved):.2f} m "
                 f"(its feet were {abs(moved):.2f} m {'under' if moved > 0 else 'above'} the floor where they touch it)")
        grounded = True
    for line in humanoid_warnings(motion, grounded=grounded):
        _say(line)
    return motion


def load_takes(paths: Iterable[str | Path], *, units: str | float = "auto", up: str = "auto",
               put_on_ground: bool = True, progress: bool = False) -> list[Motion]:
    """BVH files and folders (recursively, sorted) as takes in metres, Y up, tagged from
    their names, each made ready by :func:`prepare_take`.

    Args:
        units: the files' length unit (``"auto"``: from the skeleton's size).
        up: ``"y"``, ``"z"`` or ``"auto"`` (a humanoid standing along +Z is Z up).
        put_on_ground: move takes whose feet are off the floor onto it.
    """
    takes: list[Motion] = []
    paths = [Path(p) for p in paths]
    for p in paths:
        if p.is_dir():
            takes.extend(load_folder(p, units=units, up_axis=up, progress=progress))
        elif p.is_file():
            m = load_bvh(p, units=units, up_axis=up)
            m.tags = tags_from_name(p.stem)
            takes.append(m)
        else:
            raise DatasetError(f"{p}: no such file or folder")
    if not takes:
        raise DatasetError("no motion clips found in " + ", ".join(map(str, paths)))
    return [prepare_take(m, put_on_ground=put_on_ground) for m in takes]


def _hips_name(m: Motion) -> str | None:
    try:
        return m.skeleton.names[find_humanoid(m.skeleton).hips]
    except HumanoidError:
        return None


def fit_skeletons(motions: Sequence[Motion]) -> list[Motion]:
    """Takes of one rig brought to one skeleton, when they differ only by what a rig
    carries. Among the takes whose hips have one name: a root above the hips that some
    have and others lack is dropped (the hips become the root, world poses unchanged),
    then leaf chains that some lack (props, extra toes, end joints) are dropped from the
    others, and joints listed in another order are put in the first take's order. Each
    change is one :class:`~motionmatch.errors.DataWarning`. Takes of truly
    different skeletons are returned as they are (see :func:`skeleton_groups`)."""
    motions = list(motions)
    if len({(m.skeleton.names, m.skeleton.parents.tobytes()) for m in motions}) <= 1:
        return motions
    hips = [_hips_name(m) for m in motions]
    for name in dict.fromkeys(h for h in hips if h is not None):
        idx = [i for i, h in enumerate(hips) if h == name]
        if len(idx) > 1:
            _fit_one_rig(motions, idx, name)
    return motions


def _fit_one_rig(motions: list[Motion], idx: list[int], hips: str) -> None:
    """:func:`fit_skeletons` on the takes ``idx`` of ``motions`` (in place), whose hips are ``hips``."""
    if len({motions[i].skeleton.names[0] for i in idx}) > 1:
        for i in idx:
            m = motions[i]
            if m.skeleton.names[0] != hips:
                j0 = m.skeleton.index(hips)
                dropped = [n for j, n in enumerate(m.skeleton.names) if not m.skeleton.descends_from(j, j0)]
                motions[i] = rooted_at(m, hips)
                _say(f"{m.source or m.name}: dropped the joints above the hips ({', '.join(dropped)}) "
                     "to match the takes without them")
    common = set(motions[idx[0]].skeleton.names)
    for i in idx[1:]:
        common &= set(motions[i].skeleton.names)
    _drop_extra_leaves(motions, idx, common)
    first = motions[idx[0]].skeleton
    for i in idx[1:]:  # the same joints and hierarchy listed in another order: the first take's order
        s = motions[i].skeleton
        if s.names != first.names and _parent_names(s) == _parent_names(first):
            motions[i] = in_joint_order(motions[i], first.names)
            _say(f"{motions[i].source or motions[i].name}: joints put in the order of the other takes")


def _parent_names(s) -> dict[str, str | None]:
    """``{joint name: its parent's name}`` (``None`` for the root): a hierarchy whatever its order."""
    return {n: (s.names[p] if p >= 0 else None) for n, p in zip(s.names, s.parents)}


def _drop_extra_leaves(motions: list[Motion], idx: list[int], common: set[str]) -> None:
    """Drop from the takes ``idx`` the leaf chains of joints not in ``common`` (in place)."""
    for i in idx:
        m = motions[i]
        s = m.skeleton
        extra = [j for j in range(s.num_joints) if s.names[j] not in common]
        if not extra:
            continue
        tops = [j for j in extra if s.parents[j] >= 0 and s.names[s.parents[j]] in common]
        below_extra = {j for j in range(s.num_joints) if any(s.descends_from(j, t) for t in tops)}
        if set(extra) != below_extra:
            continue  # a joint the others have hangs below an extra one: not a leaf chain
        motions[i] = drop_joints(m, [s.names[j] for j in tops])
        shown = ", ".join(s.names[j] for j in extra[:4]) + (", ..." if len(extra) > 4 else "")
        _say(f"{m.source or m.name}: dropped {len(extra)} leaf joint{'s' * (len(extra) != 1)} the other takes "
             f"lack ({shown})")


def skeleton_groups(motions: Sequence[Motion]) -> list[list[Motion]]:
    """The takes grouped by skeleton (names and hierarchy), in order of first appearance."""
    groups: list[list[Motion]] = []
    for m in motions:
        for g in groups:
            if g[0].skeleton.same_topology(m.skeleton):
                g.append(m)
                break
        else:
            groups.append([m])
    return groups


PER_SKELETON_HINT = "give takes of one skeleton, or build one database per skeleton ({n} skeletons here) with --per-skeleton"


def one_skeleton(motions: Sequence[Motion], hint: str = PER_SKELETON_HINT) -> list[Motion]:
    """``motions`` if they share one skeleton (after :func:`fit_skeletons`), else a
    :class:`~motionmatch.errors.DatasetError` naming the first take that differs and its
    first differing joint, then ``hint`` (``{n}``: the number of skeletons)."""
    motions = fit_skeletons(motions)
    groups = skeleton_groups(motions)
    if len(groups) > 1:
        a, b = groups[0][0], groups[1][0]
        na, nb = str(a.source or a.name), str(b.source or b.name)
        diff = b.skeleton.first_difference(a.skeleton, f"in {Path(nb).name}", f"in {Path(na).name}")
        raise DatasetError(f"{nb} has a different skeleton from {na}: {diff}; {hint.format(n=len(groups))}")
    return motions
