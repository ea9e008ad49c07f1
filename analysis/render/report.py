"""Formatting of analyses, in the forms `gapscope analyze --format` gives: text a person reads
in ten seconds (render/text.py), Markdown (render/markdown.py), JSON for tools and CSV
(render/records.py). Numbers stay in ns until there; this module only gathers their entry points.
"""

from ..render.markdown import md_table, sync_note, to_markdown
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
from ..render.text import _fit, by_thread, to_text

__all__ = ["TABLES", "analysis_dict", "by_thread", "column_values", "columns", "csv_chunks",
           "json_chunks", "md_table", "plain", "records", "sync_note", "to_csv", "to_json",
           "to_markdown", "to_text", "_fit"]
