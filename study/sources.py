"""The committed directories the published study is made from (publish.py, overview.py)."""

# part -> the committed directory it is made from (relative to the repository root).
SOURCES = {
    "ladder": "docs/study-20261130T221926Z",
    "captures": "tests/data/runs",
    "observer": "docs/observer-20261201",
    "hardware": "docs/hardware-view-20261201",
    "aa": "docs/aa-20261201",
    "family": "docs/llama-20261201",
    "loop": "docs/whilegraph-20261201",
    "sizes": "docs/ladder8b-20261202/study",
    "mega": "docs/mega-20261204",
    "host": ".",
    "overview": ".",
}
CAPTURE_SOURCES = ("captures", "observer", "hardware", "family")
