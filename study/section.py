"""A section of RESULTS.md: its heading, its table, and its figure."""

import pandas as pd

from analysis.toolkit import frame_md_table


def section(title: str, table: pd.DataFrame, figure: str | None = None) -> list[str]:
    """A RESULTS.md section: its heading, its table, and its plot (figures/<figure>.png)."""
    image = [f"![{figure.replace('-', ' ')}](figures/{figure}.png)"] if figure else []
    return [title, frame_md_table(table), *image]
