#!/usr/bin/env python3
"""Extracts the SQL and C++ examples of README.md and docs/*.md so that tests can run them.

    doc_examples.py extract ROOT OUTDIR

Writes every fenced ```sql and ```cpp block (indented ones in lists too) to OUTDIR as
<page>__L<line>.<sql|cpp>, where <page> is the page's path with '/' as '_' and <line> the
line of the opening fence. A block preceded by an HTML comment marker is treated as:

    <!-- example: fragment -->   not extracted: an intentional fragment (keep these rare)
    <!-- example: NAME -->       also written as NAME.<sql|cpp>, for a test that builds it
                                 (e.g. readme-plugin: the README's plugin, built as a .so)

OUTDIR is emptied first, so a removed example disappears; OUTDIR/stamp is written last.
"""
import os
import re
import sys

FENCE_OPEN = re.compile(r"^(\s*)(```|~~~)\s*([A-Za-z0-9_+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*example:\s*([A-Za-z0-9_-]+)\s*-->\s*$")
EXTENSIONS = {"sql": "sql", "cpp": "cpp", "c++": "cpp"}


def pages(root):
    found = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        found += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    return found


def blocks(path):
    """Yields (line of the opening fence, language, marker or None, code)."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    i = 0
    marker = None
    while i < len(lines):
        line = lines[i]
        named = MARKER.match(line)
        if named:
            marker = named.group(1)
            i += 1
            continue
        opening = FENCE_OPEN.match(line)
        if not opening:
            if line.strip():
                marker = None  # a marker applies to the block right after it
            i += 1
            continue
        indent, fence, language = opening.groups()
        start = i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            text = lines[i]
            body.append(text[len(indent):] if text.startswith(indent) else text.lstrip())
            i += 1
        i += 1  # the closing fence
        yield start, language.lower(), marker, "\n".join(body) + "\n"
        marker = None


def extract(root, outdir):
    os.makedirs(outdir, exist_ok=True)
    for name in os.listdir(outdir):
        os.remove(os.path.join(outdir, name))
    count = 0
    names = set()
    for page in pages(root):
        relative = os.path.relpath(page, root)
        for line, language, marker, code in blocks(page):
            extension = EXTENSIONS.get(language)
            if extension is None or marker == "fragment":
                continue
            stem = relative.replace(os.sep, "_")
            with open(os.path.join(outdir, f"{stem}__L{line}.{extension}"), "w", encoding="utf-8") as out:
                out.write(code)
            count += 1
            if marker:
                if marker in names:
                    sys.exit(f"doc_examples: {relative}:{line}: a second example named {marker!r}")
                names.add(marker)
                with open(os.path.join(outdir, f"{marker}.{extension}"), "w", encoding="utf-8") as out:
                    out.write(code)
    with open(os.path.join(outdir, "stamp"), "w", encoding="utf-8") as out:
        out.write(f"{count} examples\n")
    return count


def main(argv):
    if len(argv) != 4 or argv[1] != "extract":
        sys.exit(__doc__)
    count = extract(os.path.abspath(argv[2]), os.path.abspath(argv[3]))
    print(f"doc_examples: {count} examples", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
