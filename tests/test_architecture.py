"""The package's layers point one way (``[tool.importlinter]`` in ``pyproject.toml``):
anim -> database / datasets -> geometry -> search -> control / environment / genmm ->
runtime -> metrics / io -> viewer -> cli, and the search's compiled kernels are private."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint(config: Path, tmp_path: Path) -> int:
    cli = pytest.importorskip("importlinter.cli", reason="import-linter is not installed (pip install -e '.[test]')")
    return cli.lint_imports(config_filename=str(config), cache_dir=str(tmp_path / "cache"), no_logo=True)


def test_the_layers_contract_holds(tmp_path):
    assert _lint(ROOT / "pyproject.toml", tmp_path) == 0


def test_the_contract_catches_an_import_against_the_flow(tmp_path):
    """The contract can fail: the same layers over a copy of the package in which the
    search imports the runtime are broken."""
    import shutil
    import sys

    pkg = tmp_path / "src" / "motionmatch"
    shutil.copytree(ROOT / "src" / "motionmatch", pkg, ignore=shutil.ignore_patterns("__pycache__", "static"))
    (pkg / "search" / "upward.py").write_text("from motionmatch.runtime import controller  # noqa: F401\n")
    text = (ROOT / "pyproject.toml").read_text()
    config = tmp_path / "pyproject.toml"
    config.write_text(text[text.index("[tool.importlinter]"):])
    sys.path.insert(0, str(tmp_path / "src"))
    saved = {k: v for k, v in sys.modules.items() if k == "motionmatch" or k.startswith("motionmatch.")}
    try:
        for k in saved:
            del sys.modules[k]
        assert _lint(config, tmp_path) == 1
    finally:
        sys.path.remove(str(tmp_path / "src"))
        for k in [k for k in sys.modules if k == "motionmatch" or k.startswith("motionmatch.")]:
            del sys.modules[k]
        sys.modules.update(saved)
