"""`gapscope doctor`: can this machine capture? One line per check, with the fix (named for how
gapscope was installed: analysis.install).

Imports no torch at module level: it must also speak on a machine without torch, GPU or nsys.
nsys is found, and its flags taken, by analysis.capture.nsys (the one definition, which
scripts/lib.sh runs too), so doctor works pip-installed, without the scripts/ folder, from any
directory.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click

from ..install import by_install
from . import nsys as capture

# The probe captures are doctor_probes.py's; their names import from here as before.
from .doctor_probes import (  # noqa: F401
    CAPTURE_TIMEOUT_S,
    DENIED,
    KERNEL_COUNT_SQL,
    METRICS_COUNT_SQL,
    METRICS_PROBE,
    METRICS_PROBE_HZ,
    PERMISSION_FIX,
    PROBE,
    check_capture,
    metrics_capture,
)

NVTX_CAPTURE_ENV, NsysError = capture.NVTX_CAPTURE_ENV, capture.NsysError
capture_flags, metrics_flags = capture.capture_flags, capture.metrics_flags
check, check_gpu = capture.check, capture.check_gpu
find_nsys, require_version = capture.find_nsys, capture.require_version

MIN_FREE_BYTES = 1 << 30  # a capture with profile.sh's flags is a few MB; a careless one is 2 GB
WARN_FREE_BYTES = 5 << 30
METRICS_DEVICE = re.compile(r"^\s*(\d+):\s*(.+?)\s*$")


def check_torch() -> dict:
    try:
        import torch
    except ImportError:
        return check(
            "FAIL",
            "torch",
            f"not importable by {sys.executable}",
            by_install("`make install` (or pip install -e '.[harness]')",
                       "pip install torch transformers nvtx (the harness' part of gapscope)"),
        )
    if torch.version.cuda is None:
        return check(
            "FAIL",
            "torch",
            f"{torch.__version__} is a CPU-only build",
            by_install("install a CUDA build of torch before `make install`: it keeps yours",
                       "pip install a CUDA build of torch (pytorch.org: Get Started)"),
        )
    if not torch.cuda.is_available():
        version = f"{torch.__version__} (CUDA {torch.version.cuda})"
        return check(
            "FAIL",
            "torch",
            f"{version} sees no GPU",
            f"check that the driver supports CUDA {torch.version.cuda}, and CUDA_VISIBLE_DEVICES",
        )
    return check("OK", "torch", f"{torch.__version__}, CUDA {torch.version.cuda}")


def check_nsys() -> dict:
    """The nsys profile.sh would use, in `path` when it is usable."""
    try:
        nsys = find_nsys()
        require_version(nsys)
    except NsysError as e:
        return check("FAIL", "nsys", str(e))  # the message names the fix
    return check("OK", "nsys", nsys.note.removeprefix("using "), path=nsys.path)


def check_metrics(nsys: str | None, gpu_ok: bool, capture: bool) -> dict:
    """Can `profile.sh --metrics` sample GPU metrics? A WARN, never a FAIL: the CUDA capture
    does not need them."""
    if nsys is None:
        return check("WARN", "metrics", "not tried: it needs nsys", "fix the nsys line above")
    try:
        listed = subprocess.run([nsys, "profile", "--gpu-metrics-devices=help"],
                                capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return check("WARN", "metrics", "`nsys profile --gpu-metrics-devices=help` took over 60 s",
                     "run it by hand to see why")
    said = (listed.stdout + listed.stderr).strip()
    if DENIED.search(said):
        return check("WARN", "metrics", "nsys may not read the GPU's performance counters "
                     "(insufficient privilege)", PERMISSION_FIX)
    devices = [m.group(1) for line in said.splitlines() if (m := METRICS_DEVICE.match(line))]
    if not devices:
        last = [line.strip() for line in said.splitlines()[-1:]] or ["no output"]
        return check("WARN", "metrics", f"nsys lists no GPU that can sample metrics: {last[0]}",
                     "GPU metrics need a Turing or newer GPU and a recent driver; see "
                     "`nsys profile --gpu-metrics-devices=help`")
    if not (capture and gpu_ok):
        return check("OK", "metrics", f"nsys can sample GPU metrics on GPU {', '.join(devices)}")
    try:
        return metrics_capture(nsys)
    except subprocess.TimeoutExpired as e:
        return check("WARN", "metrics", f"`nsys {e.cmd[1]}` of the metrics probe took over "
                     f"{CAPTURE_TIMEOUT_S} s",
                     by_install("run `scripts/profile.sh --metrics` by hand to see why",
                                "run `gapscope doctor` again, or the probe's nsys by hand"))


def check_perf() -> dict:
    path = Path("/proc/sys/kernel/perf_event_paranoid")
    if not path.exists():
        return check(
            "WARN",
            "perf",
            f"{path} not found (not Linux?)",
            "nsys' CPU sampling needs Linux; gapscope's captures do not sample",
        )
    level = int(path.read_text())
    if level > 2:
        return check(
            "WARN",
            "perf",
            f"perf_event_paranoid is {level}: nsys cannot sample the CPU",
            "gapscope's captures do not sample; for --sample, "
            "`sudo sysctl kernel.perf_event_paranoid=2`",
        )
    return check("OK", "perf", f"perf_event_paranoid is {level}")


def check_disk(traces: Path) -> dict:
    existing = next(p for p in (traces, *traces.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    detail = f"{free / 2**30:.1f} GiB free under {traces}"
    if free < MIN_FREE_BYTES:
        return check("FAIL", "disk", detail, "free at least 1 GiB (old runs are in traces/)")
    if free < WARN_FREE_BYTES:
        return check("WARN", "disk", detail, "a capture without --sample=none can take 2 GB")
    return check("OK", "disk", detail)


def safely(run, *args) -> dict:
    """A check that crashes still gets its line: doctor is what people run when things break."""
    try:
        return run(*args)
    except Exception as e:
        name = run.__name__.removeprefix("check_")
        return check("FAIL", name, f"the check itself failed: {type(e).__name__}: {e}")


def run_checks(traces: Path, capture: bool) -> list[dict]:
    gpu, torch_, nsys = safely(check_gpu), safely(check_torch), safely(check_nsys)
    checks = [gpu, torch_, nsys]
    gpu_ok = gpu["status"] == "OK" and torch_["status"] == "OK"
    if capture:
        checks.append(safely(check_capture, nsys.get("path"), gpu_ok))
    checks.append(safely(check_metrics, nsys.get("path"), gpu_ok, capture))
    return [*checks, safely(check_perf), safely(check_disk, traces)]


def format_check(c: dict) -> str:
    fix = f"  fix: {c['fix']}" if c["fix"] and c["status"] != "OK" else ""
    return f"{c['status']:<4}  {c['name']:<7}  {c['detail']}{fix}"


@click.command()
@click.option(
    "--traces-dir",
    type=click.Path(path_type=Path),
    default=lambda: os.environ.get("TRACES_DIR") or "traces",
    show_default="$TRACES_DIR or ./traces",
    help="Where captures go (gapscope profile writes its runs there).",
)
@click.option(
    "--capture/--no-capture",
    default=True,
    show_default=True,
    help="Try a real nsys capture, import and export (about 20 s on a GPU).",
)
def doctor(traces_dir: Path, capture: bool) -> None:
    """Check that this machine can capture with `gapscope profile`: GPU and driver, torch with
    CUDA, nsys and its capture -> import -> SQLite export chain, GPU metrics sampling,
    perf_event_paranoid, free disk.

    One line per check: OK, WARN or FAIL, the detail, and for a FAIL the fix. Exits 1 when a
    check that a capture needs fails (WARN lines do not count).

    Example: gapscope doctor --no-capture
    """
    checks = run_checks(traces_dir, capture)
    for c in checks:
        click.echo(format_check(c))
    if any(c["status"] == "FAIL" for c in checks):
        raise SystemExit(1)


if __name__ == "__main__":
    doctor()
