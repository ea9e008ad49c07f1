"""Tiny torch.profiler (Kineto) Chrome traces built by hand, written as Kineto writes them.

Times are given in ns and written as µs with three decimals (`"ts": 0.010` is 10 ns), the
format of Kineto's fmtTs; `whole_us=True` writes whole µs, as older Kineto did. `from_synth`
turns a tests/synth.py export into its Kineto trace, so one drawing checks both readers.
"""

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from synth import PID, TID, Synth

DEVICE_ROW = 0  # Kineto draws GPU ops on pid = device, tid = stream


@dataclass
class KinetoSynth:
    events: list = field(default_factory=list)
    next_corr: int = 1
    whole_us: bool = False

    def _time(self, t_ns: int) -> str:
        if self.whole_us:
            return f"@{t_ns // 1000}@"
        return f"@{t_ns // 1000}.{t_ns % 1000:03d}@"

    def _x(self, cat: str, name: str, start: int, end: int, pid: int, tid: int,
           args: dict | None = None) -> dict:
        event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                 "ts": self._time(start), "dur": self._time(end - start)}
        if args is not None:
            event["args"] = args
        self.events.append(event)
        return event

    def range(self, name: str, start: int, end: int, tid: int = TID, pid: int = PID,
              cat: str = "user_annotation") -> None:
        self._x(cat, name, start, end, pid, tid, {"External id": len(self.events)})

    def call(self, name: str, start: int, end: int, tid: int = TID, pid: int = PID,
             corr: int | None = None, cat: str | None = None, correlation_arg: bool = True,
             flow: bool = False) -> int:
        if corr is None:
            corr, self.next_corr = self.next_corr, self.next_corr + 1
        cat = cat or ("cuda_runtime" if name.startswith("cuda") else "cuda_driver")
        self._x(cat, name, start, end, pid, tid,
                {"cbid": 211, "correlation": corr} if correlation_arg else {"cbid": 211})
        if flow:
            self.events.append({"ph": "s", "id": corr, "pid": pid, "tid": tid,
                                "ts": self._time(start), "cat": "ac2g", "name": "ac2g"})
        return corr

    def op(self, corr: int, start: int, end: int, kind: str = "kernel", name: str = "k",
           device: int = 0, stream: int = 7, correlation_arg: bool = True,
           flow: bool = False) -> None:
        cat = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}[kind]
        if kind == "memcpy":
            name = "Memcpy DtoH (Device -> Pinned)"
        elif kind == "memset":
            name = "Memset (Device)"
        args = {"device": device, "context": 1, "stream": stream}
        if correlation_arg:
            args["correlation"] = corr
        self._x(cat, name, start, end, device, stream, args)
        if flow:
            self.events.append({"ph": "f", "id": corr, "pid": device, "tid": stream,
                                "ts": self._time(start), "cat": "ac2g", "name": "ac2g",
                                "bp": "e"})

    def launch(self, call_start: int, call_end: int, op_start: int, op_end: int,
               api: str = "cudaLaunchKernel", tid: int = TID, pid: int = PID, **op) -> int:
        corr = self.call(api, call_start, call_end, tid=tid, pid=pid)
        self.op(corr, op_start, op_end, **op)
        return corr

    def document(self) -> str:
        doc = {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms",
               "baseTimeNanoseconds": 1790857026000000000,
               "traceEvents": [
                   {"name": "process_name", "ph": "M", "ts": self._time(0), "pid": PID,
                    "tid": 0, "args": {"name": "python"}},
                   *self.events,
                   {"ph": "X", "cat": "Trace", "ts": self._time(0), "dur": self._time(0),
                    "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)",
                    "args": {"Op count": 0}},
               ]}
        # Times as bare number literals, the way Kineto prints them.
        return re.sub(r'"@([0-9.]+)@"', r"\1", json.dumps(doc, indent=1))

    def write(self, path: Path) -> Path:
        text = self.document().encode()
        path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
        return path


def from_synth(s: Synth) -> KinetoSynth:
    """The Kineto trace of a tests/synth.py export: the same ranges, calls and ops."""
    names = {i: v for v, i in s.strings.items()}
    k = KinetoSynth()
    for start, end, _, text, gtid, _, text_id, _ in s.nvtx:
        if end is not None:  # Kineto writes closed ranges only
            k.range(text if text is not None else names[text_id], start, end,
                    tid=gtid & 0xFFFFFF, pid=gtid >> 24)
    for start, end, _, gtid, corr, name_id, _ in s.calls:
        name = re.sub(r"_v\d+$", "", names[name_id])
        k.call(name, start, end, tid=gtid & 0xFFFFFF, pid=gtid >> 24, corr=corr)
    for kind, rows in s.ops.items():
        for start, end, device, _, stream, corr, _, *rest in rows:
            k.op(corr, start, end, kind=kind, name=names.get(rest[1], "k"), device=device,
                 stream=stream)
    k.next_corr = s.next_corr
    return k
