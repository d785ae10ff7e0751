"""Load a folder of BVH files, with tags guessed from the file names.

Motion-capture datasets encode what a take contains in its file name: LAFAN1 uses
``<theme><take>_<subject>[_<segment>]`` (``ground1_subject4_backward``,
``fallAndGetUp1_subject1_sprint``), Bandai-Namco uses ``dataset-N_<content>_<style>_<id>``
(``dataset-1_walk-back_happy_001``). :func:`tags_from_name` splits a name into words
(on ``_``, ``-``, spaces, digits and camelCase) and maps the words it knows to a small
vocabulary of canonical tags (:data:`TAG_VOCABULARY`); unknown words are ignored.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from tqdm.auto import tqdm

from motionmatch.anim import Motion, load_bvh
from motionmatch.errors import DatasetError

__all__ = ["TAG_SYNONYMS", "TAG_VOCABULARY", "canonical_tag", "load_folder", "split_name", "tags_from_name"]

#: Canonical tags and the words (lower case) that map to them.
#: Locomotion and actions first, then styles (Bandai-Namco), then directions.
TAG_SYNONYMS: dict[str, tuple[str, ...]] = {
    # locomotion and actions
    "walk": ("walk", "walks", "walking", "walked"),
    "run": ("run", "runs", "running"),
    "jog": ("jog", "jogs", "jogging"),
    "sprint": ("sprint", "sprints", "sprinting"),
    "dash": ("dash", "dashes", "dashing"),
    "jump": ("jump", "jumps", "jumping", "hop", "hops", "leap"),
    "dance": ("dance", "dances", "dancing"),
    "idle": ("idle", "stand", "stands", "standing", "still"),
    "creep": ("creep", "creeping", "crawl", "crawls", "crawling", "ground", "crouch", "crouching", "prone"),
    "sidestep": ("sidestep", "sidesteps", "sideways", "strafe", "strafing"),
    "backward": ("backward", "backwards", "back"),
    "turn": ("turn", "turns", "turning", "slalom"),
    "stop": ("stop", "stops", "stopping"),
    "slow": ("slow",),
    "kick": ("kick", "kicks", "kicking"),
    "punch": ("punch", "punches", "punching"),
    "slash": ("slash",),
    "fight": ("fight", "fights", "fighting"),
    "sport": ("sport", "sports"),
    "fall": ("fall", "falls", "falling"),
    "getup": ("getup",),
    "push": ("push", "pushes", "pushing"),
    "stumble": ("stumble", "stumbles", "stumbling"),
    "obstacle": ("obstacle", "obstacles"),
    "aim": ("aim", "aims", "aiming"),
    "bow": ("bow", "bows", "bowing"),
    "wave": ("wave", "waves", "waving", "bye", "byebye"),
    "call": ("call",),
    "guide": ("guide",),
    "respond": ("respond",),
    # styles (Bandai-Namco)
    "active": ("active",),
    "angry": ("angry",),
    "childish": ("childish", "children", "child"),
    "chimpira": ("chimpira",),
    "feminine": ("feminine",),
    "giant": ("giant",),
    "happy": ("happy",),
    "masculinity": ("masculinity", "masculine"),
    "musical": ("musical",),
    "normal": ("normal", "neutral"),
    "not-confident": ("notconfident", "unconfident"),
    "old": ("old", "elderly"),
    "proud": ("proud",),
    "sad": ("sad",),
    "tired": ("tired",),
    # directions
    "left": ("left",),
    "right": ("right",),
}

#: Every canonical tag, in the order above.
TAG_VOCABULARY: tuple[str, ...] = tuple(TAG_SYNONYMS)

_WORD_TO_TAG: dict[str, str] = {word: tag for tag, words in TAG_SYNONYMS.items() for word in words}
_WORD_TO_TAG.update({tag: tag for tag in TAG_SYNONYMS})

#: Word pairs that form one word (after splitting): ``not-confident``, ``fallAndGetUp``, ...
_COMPOUNDS: dict[tuple[str, str], str] = {
    ("not", "confident"): "notconfident",
    ("get", "up"): "getup",
    ("side", "step"): "sidestep",
    ("side", "steps"): "sidestep",
    ("bye", "bye"): "byebye",
}

#: Words that add tags to the tags they map to (a dash is a run; so is a sprint).
_IMPLIES: dict[str, tuple[str, ...]] = {
    "dash": ("run",),
    "sprint": ("run",),
}

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def split_name(stem: str) -> list[str]:
    """Split a file stem into lower-case words.

    Separators are ``_``, ``-``, ``.``, spaces and digits; camelCase is split too, and a
    lone capital ``N`` between lower-case letters reads as "and" (LAFAN1's ``walkNturn``).

    >>> split_name("fallAndGetUp1_subject1_standNwalk")
    ['fall', 'and', 'get', 'up', '1', 'subject', '1', 'stand', 'and', 'walk']
    """
    text = re.sub(r"(?<=[a-z])N(?=[a-z])", " and ", stem)
    words: list[str] = []
    for chunk in re.split(r"[\s_\-.]+", text):
        words.extend(w.lower() for w in _CAMEL.findall(chunk))
    return words


def canonical_tag(word: str) -> str | None:
    """The canonical tag for a word or tag (``"crawling"`` -> ``"creep"``), or ``None``."""
    w = word.strip().lower()
    if w in _WORD_TO_TAG:
        return _WORD_TO_TAG[w]
    return _WORD_TO_TAG.get(w.replace("-", "").replace("_", "").replace(" ", ""))


def tags_from_name(stem: str) -> tuple[str, ...]:
    """Canonical tags for a file stem, in order of appearance, without duplicates.

    Examples:
        ``"ground1_subject4_backward"`` -> ``("creep", "backward")``;
        ``"dance2_subject5_bobbing"`` -> ``("dance",)``;
        ``"dataset-1_walk-back_happy_001"`` -> ``("walk", "backward", "happy")``;
        ``"dataset-1_dash_not-confident_001"`` -> ``("dash", "run", "not-confident")``.

    ``dash`` and ``sprint`` also get ``run``; ``jog`` does not. See :data:`TAG_SYNONYMS`
    for the words recognised.
    """
    words = split_name(Path(stem).stem if stem.lower().endswith(".bvh") else stem)
    merged: list[str] = []
    i = 0
    while i < len(words):
        pair = (words[i], words[i + 1]) if i + 1 < len(words) else None
        if pair in _COMPOUNDS:
            merged.append(_COMPOUNDS[pair])
            i += 2
        else:
            merged.append(words[i])
            i += 1
    tags: list[str] = []
    for word in merged:
        tag = _WORD_TO_TAG.get(word)
        if tag is None:
            continue
        for t in (tag, *_IMPLIES.get(tag, ())):
            if t not in tags:
                tags.append(t)
    return tuple(tags)


TagSpec = Mapping[str, str | Iterable[str]] | Callable[[Path], Iterable[str]]


def _as_tags(value: str | Iterable[str]) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _extra_tags(tags: TagSpec | None, path: Path, rel: str) -> list[str]:
    if tags is None:
        return []
    if callable(tags):
        return _as_tags(tags(path))
    out: list[str] = []
    stem = path.stem
    for key, value in tags.items():
        if key in (stem, path.name, rel) or fnmatch.fnmatchcase(stem, key) or fnmatch.fnmatchcase(rel, key):
            out.extend(_as_tags(value))
    return out


def load_folder(
    path: str | Path,
    *,
    pattern: str = "*.bvh",
    recursive: bool = True,
    units: str | float = "auto",
    up_axis: str = "y",
    tags: TagSpec | None = None,
    auto_tags: bool = True,
    progress: bool = False,
) -> list[Motion]:
    """Load every BVH file in a folder, sorted by relative path, with tags from file names.

    Args:
        path: the folder.
        pattern: glob pattern of the files to load (matched against file names).
        recursive: also search sub-folders.
        units: length unit of the files, passed to :func:`~motionmatch.anim.load_bvh`
            (``"auto"``, ``"cm"``, ``"m"``, ... or metres per file unit); motions are in metres.
        up_axis: the files' up axis, ``"y"``, ``"z"`` or ``"auto"`` (found per file from
            the data); motions are Y up.
        tags: extra tags: a mapping from a file stem, file name, relative path or glob
            pattern (matched against the stem and the relative path) to a tag or tags, or a
            function of the file path returning tags. They are added after the automatic tags.
        auto_tags: add :func:`tags_from_name` of each stem; with ``False`` only ``tags`` are
            used, which lets a mapping override the automatic tags.
        progress: show a tqdm progress bar on stderr.

    Returns:
        One :class:`~motionmatch.anim.Motion` per file (``name`` = file stem,
        ``tags`` = the tags above, without duplicates), in sorted relative-path order.

    Raises:
        DatasetError: the folder does not exist or no file matches ``pattern``.
        BVHError: a file is malformed (the message names the file and line).
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise DatasetError(f"{folder}: not a folder (looking for {pattern!r} files)")
    found = folder.rglob(pattern) if recursive else folder.glob(pattern)
    files = sorted((p for p in found if p.is_file()), key=lambda p: p.relative_to(folder).as_posix())
    if not files:
        where = "in it or its sub-folders" if recursive else "in it"
        raise DatasetError(f"{folder}: no files matching {pattern!r} {where}")
    motions: list[Motion] = []
    for file in tqdm(files, desc=folder.name, unit="file", disable=not progress):
        motion = load_bvh(file, units=units, up_axis=up_axis)
        rel = file.relative_to(folder).as_posix()
        names = list(tags_from_name(file.stem)) if auto_tags else []
        for t in _extra_tags(tags, file, rel):
            if t not in names:
                names.append(t)
        motion.tags = tuple(names)
        motions.append(motion)
    return motions
