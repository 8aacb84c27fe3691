"""Every measured figure a doc quotes comes from a run recorded in docs/benchmarks.md.

`python tools/check_doc_figures.py [DOCS_DIR]` prints one line per finding and exits 1 if
there is any. A paragraph (or list item) of docs/*.md, benchmarks.md aside, *quotes a
benchmark* when it names one (`bench.<module>`, `bench/<file>`, `make bench`) or mentions
benchmarks.md, and speaks of a measurement (measured, median, p50, p99, mean, the benchmark
machine). Such a paragraph must link the section of benchmarks.md that holds the run
(`benchmarks.md#<heading anchor>`); that section (its heading down to the next heading of the
same or a higher level) must record the run's date (YYYY-MM-DD), commit (a hex id next to the
word "commit") and command (`python -m bench.…` or `make bench…`); and every figure of the
paragraph (a number with a unit: ms, s, MB/s, MiB, %, ×, …; code spans are settings, not
figures) must appear in that section. What it cannot see: a figure quoted with no word of a
benchmark near it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = "benchmarks.md"
CITES = re.compile(r"\bbench[./][a-z_]+|make bench|benchmarks\.md")
MEASURED = re.compile(r"\b(measured|medians?|p50|p99(\.9)?|mean|benchmark machine)\b",
                      re.IGNORECASE)
LINK = re.compile(r"benchmarks\.md#([a-z0-9_-]+)")
UNITS = (r"µs|us|ms|s|min|h|MB/s|MiB/s|GB/s|KB|MB|GB|KiB|MiB|GiB|%|×|"
         r"writes/s|records/s|rec/s|records|writes")
NUMBER = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(rf"(?<![\w.^])({NUMBER})(?:\s?(?:[–-]|→ ?≈?)\s?({NUMBER}))?\s?(?:{UNITS})"
                    r"(?![\w/])")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"\bcommits?\b[^.\n]{0,40}?\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
                    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b[^.\n]{0,20}\bcommit")
COMMAND = re.compile(r"python -m bench\.|make bench")


@dataclass(frozen=True)
class Section:
    anchor: str
    level: int
    text: str


def anchor_of(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def sections(markdown: str) -> dict[str, Section]:
    """Every heading's section: from it down to the next heading of its level or higher."""
    lines = markdown.splitlines()
    heads = [(i, len(m.group(1)), m.group(2)) for i, line in enumerate(lines)
             if (m := re.match(r"^(#{1,6})\s+(.*)$", line))]
    out: dict[str, Section] = {}
    for k, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        out.setdefault(anchor_of(title), Section(anchor_of(title), level,
                                                 "\n".join(lines[i:end])))
    return out


def paragraphs(markdown: str) -> list[tuple[int, str]]:
    """(first line number, text) of each paragraph and list item; code blocks and tables
    skipped (tables hold their own numbers, quoted from nowhere in prose)."""
    out: list[tuple[int, str]] = []
    block: list[str] = []
    start = 0
    fenced = False

    def flush() -> None:
        if block:
            out.append((start, " ".join(block)))
            block.clear()

    for n, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            flush()
            continue
        stripped = line.strip()
        if fenced or not stripped or stripped.startswith(("|", "#")) or line.startswith("    "):
            flush()
            continue
        if re.match(r"^(\* |- |\d+\. )", stripped):
            flush()
        if not block:
            start = n
        block.append(stripped)
    flush()
    return out


def figures(text: str) -> list[str]:
    """The numbers of the figures in prose (code spans removed: settings and commands)."""
    prose = re.sub(r"`[^`]*`", " ", text)
    out: list[str] = []
    for match in FIGURE.finditer(prose):
        out += [g for g in match.groups() if g]
    return out


def has_number(section: str, number: str) -> bool:
    plain = number.replace(",", "")
    pattern = rf"(?<![\d.]){re.escape(plain)}(?!\.?\d)"
    return re.search(pattern, section.replace(",", "")) is not None


def provenance_gaps(section: Section) -> list[str]:
    missing = [what for what, pattern in (("a date", DATE), ("a commit", COMMIT),
                                          ("a command", COMMAND))
               if not pattern.search(section.text)]
    return missing


def check(docs: Path) -> list[str]:
    bench = sections((docs / BENCHMARKS).read_text(encoding="utf-8"))
    findings: list[str] = []
    for path in sorted(docs.glob("*.md")):
        if path.name == BENCHMARKS:
            continue
        for line, text in paragraphs(path.read_text(encoding="utf-8")):
            if not CITES.search(text) or not MEASURED.search(text):
                continue
            numbers = figures(text)
            if not numbers:
                continue
            where = f"{path.name}:{line}"
            anchors = LINK.findall(text)
            if not anchors:
                findings.append(f"{where}: quotes {', '.join(numbers)} from a benchmark but "
                                f"links no section of {BENCHMARKS} (benchmarks.md#<anchor>)")
                continue
            cited = [bench.get(a) for a in anchors]
            for anchor, section in zip(anchors, cited, strict=True):
                if section is None:
                    findings.append(f"{where}: {BENCHMARKS}#{anchor} is no heading there")
                elif gaps := provenance_gaps(section):
                    findings.append(f"{where}: {BENCHMARKS}#{anchor} records no "
                                    f"{' and no '.join(g.removeprefix('a ') for g in gaps)} "
                                    "of its run")
            found = [s for s in cited if s is not None]
            unsourced = [x for x in numbers if not any(has_number(s.text, x) for s in found)]
            if found and unsourced:
                findings.append(f"{where}: {', '.join(unsourced)} not in "
                                + ", ".join(f"{BENCHMARKS}#{s.anchor}" for s in found))
    return findings


def main(argv: list[str]) -> int:
    docs = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "docs"
    findings = check(docs)
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
