"""The README stays a README, and the documentation's links lead somewhere: README.md is at most 300 lines, and every
relative link in README.md, docs/*.md, bench/RESULTS.md and dags/README.md names a file that exists and, when it has a
`#anchor` into a markdown file, a heading of that file (GitHub's anchors: lowercase, punctuation other than hyphens and
spaces dropped, spaces to hyphens, `-1`, `-2`, ... for repeated headings)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
MAX_README_LINES = 300

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def documents() -> list[Path]:
    return [README, *sorted((REPOSITORY / "docs").glob("*.md")), REPOSITORY / "bench" / "RESULTS.md",
            REPOSITORY / "dags" / "README.md"]


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading's text (links reduced to their text, markup dropped as punctuation)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = "".join(char for char in text if char.isalnum() or char in "-_ ")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for _, line in _prose(path):
        match = HEADING.match(line)
        if not match:
            continue
        anchor = github_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link in the prose that is not an absolute URL (code spans left out)."""
    links = []
    for number, line in _prose(path):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:, ...
                continue
            links.append((number, target))
    return links


def test_the_readme_is_at_most_300_lines():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move detail into docs/ (at most {MAX_README_LINES})"


def test_the_anchor_rule_is_githubs():
    assert github_anchor("`make run`: the platform on one machine") == "make-run-the-platform-on-one-machine"
    assert github_anchor("Many compactions, one start-up") == "many-compactions-one-start-up"
    assert github_anchor("A warehouse on S3 (and HDFS)") == "a-warehouse-on-s3-and-hdfs"
    assert github_anchor("The `acid` command (stable contract)") == "the-acid-command-stable-contract"


@pytest.mark.parametrize("document", documents(), ids=lambda path: str(path.relative_to(REPOSITORY)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(document):
    assert document.is_file(), f"{document.relative_to(REPOSITORY)} is missing"
    broken = []
    for number, target in relative_links(document):
        file_part, _, anchor = target.partition("#")
        destination = (document.parent / unquote(file_part)).resolve() if file_part else document
        where = f"{document.relative_to(REPOSITORY)}:{number}: {target}"
        if not destination.exists():
            broken.append(f"{where}: no such file")
        elif anchor and destination.suffix == ".md" and unquote(anchor).lower() not in anchors(destination):
            broken.append(f"{where}: no heading with that anchor")
    assert broken == [], "broken links:\n" + "\n".join(broken)
