"""A torch.profiler (Kineto) capture of the profiler window, beside the nsys capture.

It opens and closes at the window's edges (instrument.window_step), so it holds the same steps
nsys would; while it runs, the harness' NVTX ranges are also record_function ranges of the same
names (`Step N`, `Model Forward`, `Check Stop Condition`), the user_annotation events gapscope's
Kineto reader takes as steps. CPU activity is on (record_function ranges are CPU events), CUDA
activity where CUDA is: a CPU-only trace has no GPU events, and gapscope says so.
"""

from pathlib import Path

import torch
from torch.profiler import ProfilerActivity

from . import instrument


class KinetoCapture:
    def __init__(self, path: Path, cuda: bool):
        self.path = path
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        self.profiler = torch.profiler.profile(activities=activities)
        self.started = False
        self.stopped = False

    def prepare(self) -> None:
        """CUPTI set up before the window (torch.profiler's warm-up step), so that the first
        captured step does not carry its start-up; what runs until start() is dropped."""
        self.profiler.prepare_trace()

    def start(self) -> None:
        self.profiler.start_trace()
        self.started = True
        instrument.set_annotate(True)

    def stop(self) -> None:
        if self.started and not self.stopped:
            instrument.set_annotate(False)
            self.profiler.stop_trace()
            self.stopped = True

    def export(self) -> bool:
        """Writes the trace (gzipped for a .gz name); False when the window never opened."""
        if not self.started:
            return False
        self.stop()
        self.profiler.export_chrome_trace(str(self.path))
        return True
