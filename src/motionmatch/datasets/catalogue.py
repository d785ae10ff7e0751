"""A catalogue of public motion-capture datasets that :mod:`motionmatch.datasets` can fetch.

Each entry is a frozen :class:`Dataset`: where the archive lives, its licence and the
attribution its authors ask for, its size and SHA-256 where known, and where the BVH files
are inside it.

Provenance of the numbers below (this package was written on a machine without internet
access, so **no URL here has been tried by a download**):

* ``lafan1``: size and SHA-256 are those of the Git LFS pointer of ``lafan1/lafan1.zip`` at
  commit ``610f0658a561c7ef208c396f5d3439844bd3459b`` of ``ubisoft/ubisoft-laforge-animation-dataset``
  (an LFS pointer's ``oid`` is the SHA-256 of the file's content). The URLs are GitHub's
  usual ``raw`` and ``media.githubusercontent.com`` addresses of that file: plausible,
  **not verified**.
* ``bandai-namco-1`` / ``bandai-namco-2``: size and SHA-256 of ``data.zip`` taken in the
  same way from the LFS pointers at commit ``60c0ef1971398d0e62c036b7ebafa536b1152efe`` of
  ``BandaiNamcoResearchInc/Bandai-Namco-Research-Motiondataset``; URLs **not verified**.
  The folder of the BVH files inside ``data.zip`` is not known either, so the downloader
  falls back to the folder that holds the BVH files when ``bvh_subdirs`` do not exist.
  The repository's earlier revisions stated CC BY-NC-ND 4.0; its later README and the
  licence file distributed with the copy in ``shared/data/bandai-namco`` say CC BY-NC 4.0,
  which is what we list. (The whole repository is also offered as
  ``https://github.com/BandaiNamcoResearchInc/Bandai-Namco-Research-Motiondataset/archive/refs/heads/master.zip``,
  with ``data.zip`` inside each ``dataset/Bandai-Namco-Research-Motiondataset-N/`` folder; we
  download the inner ``data.zip`` directly, which is smaller and has a known checksum.)

If the upstream file changes, the download fails its SHA-256 check with a message naming
both digests; it never silently accepts different data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from motionmatch.errors import DatasetError

__all__ = ["ARCHIVE_FORMATS", "Dataset", "get_dataset", "list_datasets"]

#: Archive formats the extractor understands.
ARCHIVE_FORMATS = ("zip", "tar", "tar.gz", "tar.bz2", "tar.xz")

_LAFAN_REPO = "ubisoft/ubisoft-laforge-animation-dataset"
_LAFAN_COMMIT = "610f0658a561c7ef208c396f5d3439844bd3459b"
_BANDAI_REPO = "BandaiNamcoResearchInc/Bandai-Namco-Research-Motiondataset"
_BANDAI_COMMIT = "60c0ef1971398d0e62c036b7ebafa536b1152efe"


@dataclass(frozen=True)
class Dataset:
    """One downloadable dataset: a single archive holding BVH files.

    Attributes:
        name: short identifier used on the command line (``"lafan1"``).
        title: human-readable title.
        urls: download addresses of the archive, tried in order (mirrors); a network
            failure on one moves on to the next, a checksum failure does not.
        filename: name of the archive in the download cache (default: last part of the
            first URL).
        archive_format: one of :data:`ARCHIVE_FORMATS` (default: guessed from ``filename``).
        size: archive size in bytes, or ``None`` when unknown.
        sha256: lower-case hex SHA-256 of the archive, or ``None`` when unknown; unknown
            values are recorded on first download and checked afterwards (trust on first use).
        bvh_subdirs: folders inside the extracted archive that hold the BVH files, relative
            and ``/``-separated (``""`` is the archive's root); the first that exists is used.
        local_names: sub-folders of ``$MOTIONMATCH_DATA`` that hold a local copy, tried in order.
        licence: SPDX-like licence name (``"CC-BY-NC-ND-4.0"`` style is not enforced).
        licence_url: where the licence text is.
        homepage: the dataset's home page.
        attribution: the notice to keep with anything derived from the data.
        citation: BibTeX of the paper to cite, or ``None``.
        fps: frame rate of the files (frames per second), or ``None`` when it varies.
        units: length unit of the files (``"cm"``, ``"m"``, ...).
        euler_order: rotation channel order of the files (``"ZYX"``), or ``None`` if mixed.
        up_axis: the vertical axis of the files.
        num_files: number of BVH files, or ``None`` when unknown.
        description: one or two sentences on the content.
        verified: whether the URLs and checksums have been confirmed by a real download.
        extra: further ``(key, value)`` metadata, free-form.
    """

    name: str
    title: str
    urls: tuple[str, ...]
    filename: str = ""
    archive_format: str = ""
    size: int | None = None
    sha256: str | None = None
    bvh_subdirs: tuple[str, ...] = ("",)
    local_names: tuple[str, ...] = ()
    licence: str = "unknown"
    licence_url: str | None = None
    homepage: str | None = None
    attribution: str = ""
    citation: str | None = None
    fps: float | None = None
    units: str = "cm"
    euler_order: str | None = None
    up_axis: str = "Y"
    num_files: int | None = None
    description: str = ""
    verified: bool = False
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if isinstance(self.urls, str):  # a single URL given as a string
            object.__setattr__(self, "urls", (self.urls,))
        if not self.urls:
            raise DatasetError(f"dataset {self.name!r}: needs at least one URL")
        object.__setattr__(self, "urls", tuple(self.urls))
        if not self.filename:
            stem = self.urls[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            object.__setattr__(self, "filename", stem or f"{self.name}.zip")
        if not self.archive_format:
            object.__setattr__(self, "archive_format", guess_format(self.filename))
        if self.archive_format not in ARCHIVE_FORMATS:
            raise DatasetError(
                f"dataset {self.name!r}: archive format {self.archive_format!r} is not one of {', '.join(ARCHIVE_FORMATS)}"
            )
        if self.sha256 is not None:
            sha = self.sha256.strip().lower()
            if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
                raise DatasetError(f"dataset {self.name!r}: sha256 must be 64 hex digits, got {self.sha256!r}")
            object.__setattr__(self, "sha256", sha)
        if self.size is not None and self.size < 0:
            raise DatasetError(f"dataset {self.name!r}: size must be >= 0 bytes, got {self.size}")
        object.__setattr__(self, "bvh_subdirs", tuple(self.bvh_subdirs) or ("",))
        object.__setattr__(self, "local_names", tuple(self.local_names))

    def to_dict(self) -> dict[str, Any]:
        """The entry as plain JSON-serialisable data (tuples become lists)."""
        d = asdict(self)
        d["urls"] = list(self.urls)
        d["bvh_subdirs"] = list(self.bvh_subdirs)
        d["local_names"] = list(self.local_names)
        d["extra"] = dict(self.extra)
        return d


def guess_format(filename: str) -> str:
    """Archive format from a file name: ``"x.tar.gz"`` -> ``"tar.gz"``, ``"x.tgz"`` -> ``"tar.gz"``.

    Raises:
        DatasetError: the suffix is not a known archive type.
    """
    low = filename.lower()
    for suffix, fmt in (
        (".tar.gz", "tar.gz"),
        (".tgz", "tar.gz"),
        (".tar.bz2", "tar.bz2"),
        (".tbz2", "tar.bz2"),
        (".tar.xz", "tar.xz"),
        (".txz", "tar.xz"),
        (".tar", "tar"),
        (".zip", "zip"),
    ):
        if low.endswith(suffix):
            return fmt
    raise DatasetError(
        f"cannot tell the archive format of {filename!r}; expected one of .zip, .tar, .tar.gz, .tar.bz2, .tar.xz"
    )


_LAFAN1_CITATION = """@article{harvey2020robust,
  author    = {Félix G. Harvey and Mike Yurick and Derek Nowrouzezahrai and Christopher Pal},
  title     = {Robust Motion In-Betweening},
  journal   = {ACM Transactions on Graphics (Proceedings of ACM SIGGRAPH)},
  volume    = {39},
  number    = {4},
  year      = {2020},
  publisher = {ACM}
}"""

_BANDAI_CITATION = """@misc{kobayashi2023motion,
  author       = {Makito Kobayashi and Chen-Chieh Liao and Keito Inoue and Sentaro Yojima and Masafumi Takahashi},
  title        = {Motion Capture Dataset for Practical Use of AI-based Motion Editing and Stylization},
  year         = {2023},
  eprint       = {2306.08861},
  archivePrefix = {arXiv},
  howpublished = {\\url{https://github.com/BandaiNamcoResearchInc/Bandai-Namco-Research-Motiondataset}}
}"""

_BANDAI_ATTRIBUTION = (
    "Bandai-Namco-Research-Motiondataset, (c) 2022 Bandai Namco Research Inc., "
    "https://github.com/BandaiNamcoResearchInc/Bandai-Namco-Research-Motiondataset, "
    "licensed under CC BY-NC 4.0 (non-commercial use only)."
)


def _github_lfs_urls(repo: str, commit: str, path: str) -> tuple[str, ...]:
    """Addresses of a Git LFS file in a GitHub repository: the pinned commit first, then ``master``.

    ``github.com/<repo>/raw/<ref>/<path>`` redirects to ``media.githubusercontent.com`` for LFS
    files; ``urllib`` follows the redirect and keeps the ``Range`` header.
    """
    return (
        f"https://media.githubusercontent.com/media/{repo}/{commit}/{path}",
        f"https://github.com/{repo}/raw/{commit}/{path}",
        f"https://github.com/{repo}/raw/master/{path}",
    )


def _bandai(n: int, *, size: int, sha256: str, num_files: int | None, description: str) -> Dataset:
    """Catalogue entry of Bandai-Namco-Research-Motiondataset-``n`` (the two share everything else)."""
    return Dataset(
        name=f"bandai-namco-{n}",
        title=f"Bandai-Namco-Research-Motiondataset-{n}",
        urls=_github_lfs_urls(_BANDAI_REPO, _BANDAI_COMMIT, f"dataset/Bandai-Namco-Research-Motiondataset-{n}/data.zip"),
        filename="data.zip",
        archive_format="zip",
        size=size,
        sha256=sha256,
        bvh_subdirs=("data", ""),
        local_names=(f"bandai-namco/dataset-{n}", f"Bandai-Namco-Research-Motiondataset-{n}/data", f"bandai-namco-{n}"),
        licence="CC BY-NC 4.0",
        licence_url="https://creativecommons.org/licenses/by-nc/4.0/",
        homepage=f"https://github.com/{_BANDAI_REPO}",
        attribution=_BANDAI_ATTRIBUTION,
        citation=_BANDAI_CITATION,
        fps=30.0,
        units="cm",
        euler_order="ZXY",
        up_axis="Y",
        num_files=num_files,
        description=description,
    )


_CATALOGUE: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            name="lafan1",
            title="Ubisoft La Forge Animation Dataset (LAFAN1)",
            urls=_github_lfs_urls(_LAFAN_REPO, _LAFAN_COMMIT, "lafan1/lafan1.zip"),
            filename="lafan1.zip",
            archive_format="zip",
            size=144_051_503,
            sha256="ea918082b500a5d158e9d3aa39039df04cd42e25f5c02fe8f7e88e8e9365a977",
            bvh_subdirs=("", "lafan1"),
            local_names=("lafan1", "lafan1-60fps"),
            licence="CC BY-NC-ND 4.0",
            licence_url="https://creativecommons.org/licenses/by-nc-nd/4.0/",
            homepage=f"https://github.com/{_LAFAN_REPO}",
            attribution=(
                "Ubisoft La Forge Animation Dataset (LAFAN1), (c) Ubisoft Entertainment, "
                f"https://github.com/{_LAFAN_REPO}, licensed under CC BY-NC-ND 4.0 "
                "(non-commercial use only, no redistribution of modified data)."
            ),
            citation=_LAFAN1_CITATION,
            fps=30.0,
            units="cm",
            euler_order="ZYX",
            up_axis="Y",
            num_files=77,
            description=(
                "77 takes by 5 subjects, 496,672 frames at 30 fps (~4.6 h): walking, running, "
                "sprinting, obstacles, jumps, crawling, dance, fights, falls, pushes."
            ),
        ),
        _bandai(
            1, size=12_000_689, sha256="6dbcdbba53e0d45595bd332cc814ff4636bd06e3c484f66a8e67d6f79b116757",
            num_files=175,
            description=(
                "175 clips, 36,673 frames at 30 fps: 17 contents (walk, walk-back/left/right, run, dash, "
                "bow, bye, kick, punch, slash, dance, ...) in up to 15 styles (happy, sad, proud, tired, ...). "
                "Position channels on every joint."
            ),
        ),
        _bandai(
            2, size=126_309_261, sha256="62b24dc8aa8934f2c2239746218ddbf1b004b5a238ad461330690d07ed1486bd",
            num_files=None,
            description=(
                "384,931 frames at 30 fps: 10 contents, mainly locomotion (walk, walk-turn-left/right, run) "
                "and hand actions, in 7 styles. Position channels on every joint."
            ),
        ),
    )
}


def _normalise_name(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def list_datasets() -> list[Dataset]:
    """All catalogue entries, in catalogue order."""
    return list(_CATALOGUE.values())


def get_dataset(name: str | Dataset) -> Dataset:
    """The catalogue entry called ``name`` (case and ``_``/``-`` insensitive).

    A :class:`Dataset` passes through unchanged, so that functions taking ``str | Dataset``
    can call this first.

    Raises:
        DatasetError: no entry has that name; the message lists the known names.
    """
    if isinstance(name, Dataset):
        return name
    key = _normalise_name(str(name))
    try:
        return _CATALOGUE[key]
    except KeyError:
        known = ", ".join(_CATALOGUE)
        raise DatasetError(f"unknown dataset {name!r}; known datasets: {known}") from None


#: One take per skeleton of the shared data folder (paths relative to the data root):
#: LAFAN1 (60 and 30 fps), both Bandai-Namco sets, the dog and the GenMM examples' six
#: rigs. Tests and benchmarks that must cover every skeleton use these.
SKELETON_SAMPLES: tuple[str, ...] = (
    "lafan1-60fps/walk1_subject1_walk2.bvh",
    "lafan1/walk1_subject1_stop.bvh",
    "bandai-namco/dataset-1/dataset-1_walk-left_tired_001.bvh",
    "bandai-namco/dataset-2/dataset-2_run_active_001.bvh",
    "quadruped-dog/D1_025_KAN01_001.bvh",
    "genmm-examples/Crabnew_Crab-dance-long.bvh",
    "genmm-examples/Elephant_idle1.bvh",
    "genmm-examples/Joe_Baseball-Milling-Idle-edited-keyframes.bvh",
    "genmm-examples/Joe_Salsa-Dancing-6.bvh",
    "genmm-examples/Malcolm_Gangnam-Style.bvh",
    "genmm-examples/Xia_normal.bvh",
)
