"""The documentation site: it builds without a warning, covers every exception and every
environment variable the code reads, and reads as documentation of the software as it is (no
development history, no links to files outside the repository)."""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]

# What a lab notebook says and a user page must not: development stops, issue numbers, links
# into the development notes that are not part of the repository.
HISTORY = re.compile(r"\bstop[ _]?\d+|\bissue[ _#]?\d+|\.\./shared\b", re.IGNORECASE)


def test_site_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs and mkdocstrings are not installed (pip install -e '.[docs]')")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    import asyncgpu
    missing = [n for n in asyncgpu.__all__ if f'id="asyncgpu.{n}"' not in api]
    assert not missing, f"the API reference does not document {missing}"


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    orphans = [str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")
               if str(p.relative_to(DOCS)) not in nav]
    assert not orphans, f"pages missing from mkdocs.yml's nav: {orphans}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_has_no_development_history(page):
    text = page.read_text()
    hits = [m.group(0) for m in HISTORY.finditer(text)]
    assert not hits, f"{page.relative_to(ROOT)} mentions {hits}"


def _error_classes():
    import asyncgpu
    from asyncgpu.core import errors as _errors
    classes = {name for name, obj in vars(_errors).items()
               if inspect.isclass(obj) and issubclass(obj, asyncgpu.AsyncGPUError)}
    classes |= {name for name in asyncgpu.__all__
                if inspect.isclass(getattr(asyncgpu, name))
                and issubclass(getattr(asyncgpu, name), BaseException)}
    return sorted(classes)


def test_troubleshooting_has_an_entry_for_every_exception():
    headings = set(re.findall(r"^## (\w+)\s*$", (DOCS / "troubleshooting.md").read_text(), re.M))
    missing = [c for c in _error_classes() if c not in headings]
    assert not missing, f"docs/troubleshooting.md has no section for {missing}"


def _variables_read_by_the_code():
    names = set()
    for path in (ROOT / "asyncgpu").rglob("*.py"):
        names |= set(re.findall(r"\bASYNCGPU_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    from asyncgpu.core import config as _config
    names |= set(_config.ENVIRONMENT)
    return sorted(names)


def test_environment_reference_documents_every_variable_the_code_reads():
    documented = set(re.findall(r"`(ASYNCGPU_[A-Z0-9_]+)`",
                                (DOCS / "reference" / "environment.md").read_text()))
    found = _variables_read_by_the_code()
    assert "ASYNCGPU_BACKEND" in found and "ASYNCGPU_TRACE" in found   # the scan works
    missing = [v for v in found if v not in documented]
    assert not missing, f"docs/reference/environment.md does not document {missing}"


def test_data_files_named_by_the_pages_exist_and_none_is_unnamed():
    text = "\n".join(p.read_text() for p in PAGES)
    named = set(re.findall(r"docs/data/([\w.-]+)", text))
    present = {p.name for p in (DOCS / "data").iterdir()} if (DOCS / "data").exists() else set()
    assert not named - present, f"pages name data files that do not exist: {named - present}"
    assert not present - named, f"data files no page names: {present - named}"


def test_images_in_docs_img_are_all_used():
    text = "\n".join(p.read_text() for p in PAGES)
    unused = [p.name for p in (DOCS / "img").iterdir() if p.name not in text]
    assert not unused, f"pictures no page uses: {unused}"
