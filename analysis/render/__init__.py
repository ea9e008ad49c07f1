"""Analyses as people and tools read them: text and Markdown reports, JSON and CSV, the comparison
table, the hardware view, PNG figures and the Perfetto timeline. Numbers stay in ns until here."""
