"""The README and docs/ link to one another: every relative link names a file that exists, and an anchor
(`#section`) a heading of that file, as GitHub spells its anchors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of `page` (a repeated heading gets -1, -2...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    for line in text.split("\n"):
        if not line.startswith("#"):
            continue
        anchor = re.sub(r"[^a-z0-9 _-]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", link):
            continue
        file, _, anchor = link.partition("#")
        target = (page.parent / file).resolve() if file else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no such heading")
    assert broken == []


def test_the_readme_keeps_the_headings_others_link_to() -> None:
    """hub.toml, the policies, deploy/ and the hub's own messages cite README sections by name."""
    headings = {line.lstrip("#").strip() for line in (ROOT / "README.md").read_text(encoding="utf-8").split("\n")}
    cited = set()
    for path in [ROOT / "hub.toml", *ROOT.glob("mcp_hub/**/*.py"), *ROOT.glob("deploy/**/*"), *ROOT.glob("policies/*")]:
        if path.is_file():
            cited |= set(re.findall(r'README, "([^"]+)"', path.read_text(encoding="utf-8", errors="replace")))
    assert cited and cited <= headings, cited - headings
