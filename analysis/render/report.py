"""Formatting of analyses, in the forms `gapscope analyze --format` gives: text a person reads
in ten seconds (render/text.py), Markdown (render/markdown.py), JSON for tools and CSV
(render/records.py). Numbers stay in ns until there; this module only gathers their entry points.
"""

from ..render import markdown, text
from ..render.host import host_lines, md_host
from ..render.markdown import md_table, sync_note
from ..render.records import (
    TABLES,
    analysis_dict,
    column_values,
    columns,
    csv_chunks,
    json_chunks,
    plain,
    records,
    to_csv,
    to_json,
)
from ..render.text import _fit, by_thread


def to_text(label: str, analyses: list, schema: str) -> str:
    """`gapscope analyze`'s text: each device's summary, syncs and host table."""
    return text.to_text(label, analyses, schema, host_lines_of)


def host_lines_of(a) -> list:
    return host_lines(a.summary)


def to_markdown(label: str, analyses: list) -> str:
    """`--format md`: each device's tables, the host table after the syncs."""
    return markdown.to_markdown(label, analyses, md_host)

__all__ = ["TABLES", "analysis_dict", "by_thread", "column_values", "columns", "csv_chunks",
           "json_chunks", "md_table", "plain", "records", "sync_note", "to_csv", "to_json",
           "to_markdown", "to_text", "_fit"]
