"""What the analysis measures in a Trace (analysis.readers.trace), as pure functions: steps (from
ranges, functions or inferred), GPU idle gaps and their causes, streams, kernels, blocking syncs,
the bandwidth floor, sampled GPU metrics, the untraced twin set beside the traced steps, ranks;
summary.py puts them together, device by device. DataFrames in, DataFrames out, times in ns."""
