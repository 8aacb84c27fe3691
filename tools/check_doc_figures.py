"""Every measured figure a doc quotes comes from a run recorded in docs/benchmarks-history.md.

`python tools/check_doc_figures.py [DOCS_DIR]` prints one line per finding and exits 1 if there
is any. A paragraph (or list item) of docs/*.md, the history aside, *quotes a benchmark* when
it names one (`bench.<module>`, `bench/<file>`, `make bench`) or mentions
benchmarks-history.md, and speaks of a measurement (measured, median, p50, p99, mean, the
benchmark machine). Such a paragraph must link the section of benchmarks-history.md that holds
the run (`benchmarks-history.md#<heading anchor>`); that section (its heading down to the next
heading of the same or a higher level) must record the run's date (YYYY-MM-DD), commit (a hex
id next to the word "commit") and command (`python -m bench.…` or `make bench…`); and every
figure of the paragraph (a number with a unit: ms, s, MB/s, MiB, %, ×, …; code spans are
settings, not figures) must appear in that section; "commit" may also read "build", as in
"build 1a2b3c4". Tables are skipped, but a table row that links a section of the history is
checked as such a paragraph. docs/benchmarks.md, the results page ("how fast is it now"), is
held to more: each of its table rows that quotes a figure must link the section recording its
run and name that run's date and commit, both found in a linked section. What it cannot see: a
figure quoted with no word of a benchmark near it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = "benchmarks-history.md"  # every run, in order
SUMMARY = "benchmarks.md"  # "How fast is it now": every figure in its tables names its run
CITES = re.compile(r"\bbench[./][a-z_]+|make bench|benchmarks(-history)?\.md")
MEASURED = re.compile(r"\b(measured|medians?|p50|p99(\.9)?|mean|benchmark machine)\b",
                      re.IGNORECASE)
LINK = re.compile(r"benchmarks-history\.md#([a-z0-9_-]+)")
UNITS = (r"µs|us|ms|s|min|h|MB/s|MiB/s|GB/s|KB|MB|GB|KiB|MiB|GiB|%|×|"
         r"writes/s|records/s|rec/s|topics/s|partitions/s|records|writes")
NUMBER = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(rf"(?<![\w.^])({NUMBER})(?:\s?(?:[–-]|→ ?≈?)\s?({NUMBER}))?\s?(?:{UNITS})"
                    r"(?![\w/])")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
HEX_ID = r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
# "commit 1a2b3c4" (also across a line break) or "build 1a2b3c4", or "1a2b3c4's commit".
COMMIT = re.compile(rf"\b(?:[Cc]ommits?|[Bb]uilds?)\b(?:[^.\n]|\n(?!\n)){{0,40}}?{HEX_ID}"
                    rf"|{HEX_ID}[^.\n]{{0,20}}\bcommit")
# In a summary row, where a hex id stands alone, it may be all digits ("6787628").
ROW_COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
SEPARATOR = re.compile(r"\|(?:\s*:?-+:?\s*\|)+")
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


def table_rows(markdown: str) -> list[tuple[int, str]]:
    """(line number, text) of each table body row: a header and its |---| line skipped."""
    out: list[tuple[int, str]] = []
    lines = markdown.splitlines()
    fenced = False
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        stripped = line.strip()
        if fenced or not stripped.startswith("|") or SEPARATOR.fullmatch(stripped):
            continue
        if n < len(lines) and SEPARATOR.fullmatch(lines[n].strip()):
            continue  # a header row
        out.append((n, stripped))
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


def run_named(where: str, text: str, found: list[Section]) -> list[str]:
    """A summary row names its run: a date and a commit, each held by a section it links."""
    prose = re.sub(r"`[^`]*`", " ", LINK.sub(" ", text))
    findings: list[str] = []
    for what, pattern in (("date", DATE), ("commit", ROW_COMMIT)):
        named = pattern.findall(prose)
        if not named:
            findings.append(f"{where}: names no {what} of its run")
        for value in named:
            if not any(value in s.text for s in found):
                findings.append(f"{where}: {what} {value} not in "
                                + ", ".join(f"{BENCHMARKS}#{s.anchor}" for s in found))
    return findings


def check_quote(where: str, text: str, numbers: list[str],
                bench: dict[str, Section], summary_row: bool) -> list[str]:
    """One paragraph or table row that quotes benchmark figures."""
    anchors = LINK.findall(text)
    if not anchors:
        return [f"{where}: quotes {', '.join(numbers)} from a benchmark but "
                f"links no section of {BENCHMARKS} ({BENCHMARKS}#<anchor>)"]
    findings: list[str] = []
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
    if summary_row and found:
        findings += run_named(where, text, found)
    return findings


def check(docs: Path) -> list[str]:
    bench = sections((docs / BENCHMARKS).read_text(encoding="utf-8"))
    findings: list[str] = []
    for path in sorted(docs.glob("*.md")):
        if path.name == BENCHMARKS:
            continue
        markdown = path.read_text(encoding="utf-8")
        summary = path.name == SUMMARY
        quotes = [(line, text, False) for line, text in paragraphs(markdown)
                  if CITES.search(text) and MEASURED.search(text)]
        # A table row quotes a run when it links one; every row of the summary is a quote.
        quotes += [(line, text, summary) for line, text in table_rows(markdown)
                   if summary or LINK.search(text)]
        for line, text, summary_row in sorted(quotes):
            if numbers := figures(text):
                findings += check_quote(f"{path.name}:{line}", text, numbers, bench,
                                        summary_row)
    return findings


def main(argv: list[str]) -> int:
    docs = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "docs"
    findings = check(docs)
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
