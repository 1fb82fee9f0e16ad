"""Rewrite the golden pages (tests/golden/REPORT*.md, breakdown.csv) from their fixed records."""

from tests.golden import PAGES, pages

for name, text in pages().items():
    PAGES[name].write_text(text, encoding="utf-8")
    print(f"wrote {PAGES[name]}")
