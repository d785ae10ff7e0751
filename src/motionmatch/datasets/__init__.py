"""Public motion-capture datasets: catalogue, download cache, and folder loading.

Typical use::

    from motionmatch.datasets import resolve, load_folder

    folder = resolve("lafan1")          # local copy ($MOTIONMATCH_DATA), else cache, else download
    motions = load_folder(folder)       # list[Motion], in metres, tagged from the file names
    walks = [m for m in motions if "walk" in m.tags]

Every dataset here is licensed for non-commercial research only; see each entry's
``licence`` and ``attribution`` (``motionmatch datasets list``).
"""

from motionmatch.datasets.catalogue import ARCHIVE_FORMATS, SKELETON_SAMPLES, Dataset, get_dataset, list_datasets
from motionmatch.datasets.download import (
    ENV_CACHE,
    ENV_DATA,
    archive_path,
    cached,
    data_root,
    default_cache_dir,
    download_file,
    extract_archive,
    fetch,
    find_local,
    resolve,
    sha256_file,
    verify_file,
)
from motionmatch.datasets.folder import (
    TAG_SYNONYMS,
    TAG_VOCABULARY,
    canonical_tag,
    load_folder,
    split_name,
    tags_from_name,
)
from motionmatch.datasets.takes import fit_skeletons, load_takes, one_skeleton, prepare_take, skeleton_groups

__all__ = [
    "ARCHIVE_FORMATS",
    "ENV_CACHE",
    "ENV_DATA",
    "SKELETON_SAMPLES",
    "TAG_SYNONYMS",
    "TAG_VOCABULARY",
    "Dataset",
    "archive_path",
    "cached",
    "canonical_tag",
    "data_root",
    "default_cache_dir",
    "download_file",
    "extract_archive",
    "fetch",
    "find_local",
    "fit_skeletons",
    "get_dataset",
    "list_datasets",
    "load_folder",
    "load_takes",
    "one_skeleton",
    "prepare_take",
    "resolve",
    "sha256_file",
    "skeleton_groups",
    "split_name",
    "tags_from_name",
    "verify_file",
]
