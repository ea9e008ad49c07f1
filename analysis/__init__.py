"""gapscope analysis: reads an Nsight Systems SQLite export (no torch needed)."""
