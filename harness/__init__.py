"""gapscope harness: GPT-2 decode variants instrumented with NVTX (needs torch)."""
