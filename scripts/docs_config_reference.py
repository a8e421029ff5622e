#!/usr/bin/env python3
"""Keeps the configuration reference in docs/operations.md equal to `outboxd config reference`.

    docs_config_reference.py check OUTBOXD PAGE   exit 1 (with a diff) when the section differs
    docs_config_reference.py write OUTBOXD PAGE   rewrites the section

The section is the text between the BEGIN GENERATED and END GENERATED config reference
markers; the settings table in host/src/config/settings_table.cpp is its one source.
"""
import difflib
import re
import subprocess
import sys

SECTION = re.compile(r"(<!-- BEGIN GENERATED: config reference[^>]*-->\n)(.*?)(<!-- END GENERATED: config reference -->)",
                     re.DOTALL)


def main(argv):
    if len(argv) != 4 or argv[1] not in ("check", "write"):
        sys.exit(__doc__)
    mode, outboxd, page = argv[1:]
    generated = subprocess.run([outboxd, "config", "reference"], check=True, capture_output=True, text=True,
                               timeout=30).stdout
    with open(page, encoding="utf-8") as handle:
        text = handle.read()
    match = SECTION.search(text)
    if not match:
        sys.exit(f"{page}: no config reference markers (<!-- BEGIN GENERATED: config reference ... -->)")
    if match.group(2) == generated:
        return 0
    if mode == "write":
        with open(page, "w", encoding="utf-8") as handle:
            handle.write(text[:match.start(2)] + generated + text[match.end(2):])
        print(f"{page}: configuration reference regenerated", file=sys.stderr)
        return 0
    sys.stdout.writelines(difflib.unified_diff(match.group(2).splitlines(True), generated.splitlines(True),
                                               f"{page} (committed)", "outboxd config reference"))
    print(f"{page}: the configuration reference differs from `outboxd config reference`; "
          "run scripts/docs.sh regen", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
