#!/usr/bin/env python3
"""Fails on a broken relative link or anchor in README.md and docs/*.md.

Checks every Markdown link whose target is not a URL: the file it names must exist
(relative to the page), and a #fragment must be a heading (GitHub's anchor rules) or an
explicit id/name anchor of the target page. Links inside fenced code blocks and inline code
are ignored. Usage: check_doc_links.py [ROOT]   (ROOT: the repository, default: this
script's parent directory). Exit 0 when every link resolves, 1 otherwise (one line each).
"""
import os
import re
import sys
from urllib.parse import unquote

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:name|id)\s*=\s*\"([^\"]+)\"", re.IGNORECASE)
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(heading):
    """GitHub's anchor for a heading: rendered text, lower case, punctuation dropped,
    spaces to hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis markers
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_code(path):
    """Yields (line number, text) of lines outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            match = FENCE.match(line)
            if match:
                if fence is None:
                    fence = match.group(1)
                elif line.strip().startswith(fence):
                    fence = None
                continue
            if fence is None:
                yield number, line.rstrip("\n")


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        found = set()
        counts = {}
        for _, line in lines_outside_code(path):
            for name in HTML_ANCHOR.findall(line):
                found.add(name)
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        _anchor_cache[path] = found
    return _anchor_cache[path]


def check(page, root):
    problems = []
    for number, line in lines_outside_code(page):
        text = INLINE_CODE.sub("", line)
        targets = [m.group(2) for m in LINK.finditer(text)]
        ref = REFERENCE.match(text)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if not target or URL.match(target):
                continue
            file_part, _, fragment = target.partition("#")
            file_part = unquote(file_part)
            where = f"{os.path.relpath(page, root)}:{number}"
            dest = page if not file_part else os.path.normpath(os.path.join(os.path.dirname(page), file_part))
            if not os.path.exists(dest):
                problems.append(f"{where}: broken link {target!r}: {os.path.relpath(dest, root)} does not exist")
                continue
            if fragment and dest.endswith(".md") and os.path.isfile(dest):
                if unquote(fragment) not in anchors(dest):
                    problems.append(f"{where}: broken anchor {target!r}: no heading or anchor "
                                    f"#{fragment} in {os.path.relpath(dest, root)}")
    return problems


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    pages = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        pages += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    problems = []
    for page in pages:
        problems += check(page, root)
    for problem in problems:
        print(problem)
    print(f"check_doc_links: {len(pages)} pages, {len(problems)} broken links", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
