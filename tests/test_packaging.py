"""The installed package is the source tree: every code folder is listed as a subpackage of
``kernelevo`` (a folder missing from the list is silently left out of a wheel)."""

from __future__ import annotations

import pytest

from conftest import ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later

CODE_FOLDERS = ("agent", "tools", "sandbox", "prompts", "tasks")


def test_every_code_folder_is_a_listed_subpackage() -> None:
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    found = set()
    for top in CODE_FOLDERS:
        for init in (ROOT / top).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(("kernelevo", *parts)))
    assert found - listed == set(), "folders a wheel would leave out"
    assert listed - found == set(), "listed packages without a folder"
    assert all(name.split(".")[0] == "kernelevo" for name in listed)  # never a bare top-level package


def test_package_data_is_declared() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.html" in data["kernelevo.agent.report"] and (ROOT / "agent" / "report" / "page.html").exists()
