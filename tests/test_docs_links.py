"""The README's and docs/'s relative links point at files that exist (the long-form docs moved
out of the README must stay reachable from it)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    missing = [target for target, _ in LINK.findall(page.read_text(encoding="utf-8"))
               if "://" not in target and not target.startswith("mailto:")
               and not (page.parent / target).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"


def test_the_readme_links_every_long_form_doc():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for doc in (ROOT / "docs").glob("*.md"):
        assert f"docs/{doc.name}" in readme, f"docs/{doc.name} is not linked from the README"
