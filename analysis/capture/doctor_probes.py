"""The doctor's two probe captures (`gapscope doctor`, doctor.py): a second of matmuls under
profile.sh's flags, captured, imported and exported to SQLite, its kernels counted; and under
`profile.sh --metrics`' flags, its GPU metric samples counted. Each needs the GPU, torch and nsys;
the probe runs in a child Python, so this module imports no torch either.
"""

import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .nsys import NVTX_CAPTURE_ENV, capture_flags, check, metrics_flags

CAPTURE_TIMEOUT_S = 300

# A second of matmuls inside cudaProfilerStart/Stop: the smallest capture shaped like the harness'.
PROBE = """
import torch
x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(50):
    x = torch.tanh(x @ x)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
"""
# The metrics capture's window is an NVTX range (analysis.capture.nsys.metrics_flags), as the
# harness opens around its window's steps.
METRICS_PROBE = """
import nvtx
import torch
x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
nvtx.push_range("gapscope window")
for _ in range(50):
    x = torch.tanh(x @ x)
torch.cuda.synchronize()
nvtx.pop_range()
"""
KERNEL_COUNT_SQL = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"
METRICS_COUNT_SQL = "SELECT count(*) FROM GPU_METRICS"
METRICS_PROBE_HZ = "10000"
# What nsys and the driver say when the GPU's performance counters are for admin users only.
DENIED = re.compile(r"privilege|ERR_NVGPUCTRPERM|RestrictProfilingToAdminUsers|permission", re.I)
PERMISSION_FIX = (
    "let every user read the GPU counters: `options nvidia NVreg_RestrictProfilingToAdminUsers=0` "
    "in /etc/modprobe.d/, then reload the driver or reboot (or profile as root); "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


def check_capture(nsys: str | None, gpu_ok: bool) -> dict:
    if nsys is None or not gpu_ok:
        return check(
            "FAIL",
            "capture",
            "not tried: it needs the GPU, torch and nsys above",
            "fix the lines above first",
        )
    flags = capture_flags("cuda,nvtx")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gapscope-doctor-") as tmp:
        out = Path(tmp) / "probe"
        profile = [nsys, "profile", *flags, "-o", str(out), sys.executable, "-c", PROBE]
        try:
            ran = subprocess.run(profile, capture_output=True, text=True, timeout=CAPTURE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return check(
                "FAIL",
                "capture",
                f"nsys profile took over {CAPTURE_TIMEOUT_S} s",
                "run the printed flags by hand: `nsys profile --sample=none "
                "--cpuctxsw=none` on a short CUDA program",
            )
        said = (ran.stdout + ran.stderr).strip().splitlines()[-1:] or ["no output"]
        rep, qdstrm, db = (out.with_suffix(s) for s in (".nsys-rep", ".qdstrm", ".sqlite"))
        if not rep.exists() and qdstrm.exists():
            return check(
                "FAIL",
                "capture",
                "nsys captured a .qdstrm but could not import it",
                "its importer (QdstrmImporter) is missing or lacks a library "
                "(e.g. libdw.so.1): install the full Nsight Systems",
            )
        if not rep.exists():
            return check(
                "FAIL",
                "capture",
                f"nsys wrote no capture (exit {ran.returncode}): {said[0]}",
                "run `nsys profile` by hand on a CUDA program to see why",
            )
        try:
            exported = subprocess.run(
                [nsys, "export", "--type", "sqlite", "-o", str(db), str(rep)],
                capture_output=True,
                text=True,
                timeout=CAPTURE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return check("FAIL", "capture", f"nsys export took over {CAPTURE_TIMEOUT_S} s",
                         "run `nsys export --type sqlite` by hand on a short capture")
        if exported.returncode != 0 or not db.exists():
            return check(
                "FAIL",
                "capture",
                f"nsys export to SQLite failed (exit {exported.returncode})",
                "use an nsys whose export works (see above)",
            )
        with sqlite3.connect(db) as con:
            try:
                kernels = con.execute(KERNEL_COUNT_SQL).fetchone()[0]
            except sqlite3.OperationalError:
                kernels = 0
    seconds = time.monotonic() - t0
    if kernels == 0:
        return check(
            "FAIL",
            "capture",
            "the SQLite export holds no CUDA kernel",
            "try `nsys profile --trace=cuda` on a CUDA program by hand",
        )
    return check(
        "OK", "capture", f"captured, imported and exported {kernels} kernels in {seconds:.0f} s"
    )


def metrics_capture(nsys: str) -> dict:
    """A second of the probe under `profile.sh --metrics`' flags: were samples written?"""
    flags = metrics_flags("0", METRICS_PROBE_HZ)
    with tempfile.TemporaryDirectory(prefix="gapscope-doctor-") as tmp:
        out = Path(tmp) / "metrics"
        ran = subprocess.run([nsys, "profile", *flags, "-o", str(out), sys.executable, "-c",
                              METRICS_PROBE], capture_output=True, text=True,
                             timeout=CAPTURE_TIMEOUT_S, env=os.environ | NVTX_CAPTURE_ENV)
        said = (ran.stdout + ran.stderr).strip()
        rep, db = out.with_suffix(".nsys-rep"), out.with_suffix(".sqlite")
        if rep.exists():
            subprocess.run([nsys, "export", "--type", "sqlite", "-o", str(db), str(rep)],
                           capture_output=True, text=True, timeout=CAPTURE_TIMEOUT_S)
        samples = 0
        if db.exists():
            with sqlite3.connect(db) as con:
                try:
                    samples = con.execute(METRICS_COUNT_SQL).fetchone()[0]
                except sqlite3.OperationalError:
                    samples = 0
    if samples:
        return check("OK", "metrics", f"sampled {samples} GPU metric values on GPU 0 in a probe")
    if DENIED.search(said):
        return check("WARN", "metrics", "the probe sampled no GPU metrics: insufficient "
                     "privilege", PERMISSION_FIX)
    last = said.splitlines()[-1:] or ["no output"]
    return check("WARN", "metrics", f"the probe sampled no GPU metrics: {last[0]}",
                 f"{PERMISSION_FIX}; or another profiler holds the counters")

