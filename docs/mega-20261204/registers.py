"""What the compiler makes of mega's kernel for the H100/H200 (sm_90a), with no GPU: the kernel
compiled ahead of time by Triton for that target at each size and batch of the bench, its PTX
assembled again by the ptxas Triton uses for sm_90, with -v: registers a thread, spill stores and
loads, the stack, and how many programs of its warps an SM's register file holds (the residency
check's rule, harness/llama_mega.resident). Then, at one row and Llama-3.2-1B's shape, the same
with each task kind's branch compiled out in turn (`if False:` in place of its test), which
tells the kind whose code sets the register count and the spills. Run from the repository's
root on a machine with Triton:

    python3 docs/mega-20261204/registers.py > docs/mega-20261204/registers.json

The models are built on the meta device (no weights), so 8B's shape costs no memory.
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget

from harness import llama_mega as M
from harness.config import RunConfig, validate
from harness.decode import new_state
from harness.model import build_model, special_tokens
from harness.stops import stop_steps

TARGET = GPUTarget("cuda", 90, 32)
REGS_PER_SM, THREADS_PER_SM = 65536, 2048  # sm_90

def ptxas() -> str:
    """The ptxas Triton itself assembles sm_90 with (its backend's get_ptxas)."""
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(90).path

INFO = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")


class Ahead:
    """The driver Triton asks for its target: sm_90, no device."""

    def get_current_target(self):
        return TARGET

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0

    def get_active_torch_device(self):
        return torch.device("cpu")

    def get_device_interface(self):
        return torch.cuda


def compiled(size: str, batch: int):
    with torch.device("meta"):
        model = build_model(f"llama:{size}", "bf16", "meta", seed=0)
    bos, eos = special_tokens(model.config)
    cfg = validate(RunConfig(variant="kv", model=f"llama:{size}", batch=batch, new_tokens=100,
                             device="cpu", dtype="bf16"))
    st = new_state(batch, 100, stop_steps("none", batch, 100, 0), "meta", 0, bos, eos)
    st["sleep_cycles"] = 0
    _, kv = M.mega_eager(model, cfg, st, programs=132)
    seen = {}

    class Capture:
        def __getitem__(self, grid):
            return lambda *args, **consts: seen.update(args=args, consts=consts)

    from harness import mega_kernel

    real = mega_kernel._mega_kernel
    mega_kernel._mega_kernel = Capture()
    try:
        M._launch(model, kv, st)
    finally:
        mega_kernel._mega_kernel = real
    return real.warmup(*seen["args"], grid=(1,), **seen["consts"]), seen["consts"]["num_warps"]


def ptxas_v(ptx: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([ptxas(), "-v", "--gpu-name", "sm_90a", str(src), "-o",
                              str(Path(d) / "k.cubin")], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr)
    out = out.stderr
    stack, stores, loads = (int(x) for x in INFO.search(out).groups())
    return {"registers": int(REGS.search(out).group(1)), "stack_bytes": stack,
            "spill_store_bytes": stores, "spill_load_bytes": loads}


KINDS = ("EMBED", "QKV", "ATTN", "O", "GLU", "DOWN", "HEAD", "ADVANCE")


def without_each(size: str, batch: int) -> list:
    """compiled(size, batch)'s counts with each kind's branch compiled out in turn."""
    from harness.mega_kernel import _mega_kernel

    src, out = _mega_kernel.src, []
    try:
        for kind in KINDS:
            _mega_kernel._unsafe_update_src(
                re.sub(rf"(if|elif) kind == K_{kind}:", r"\1 False:", src, count=1))
            _mega_kernel.device_caches.clear()
            kernel, _ = compiled(size, batch)
            out.append({"without": kind.lower(), **ptxas_v(kernel.asm["ptx"])})
            print(f"{size} b{batch} without {kind}: {out[-1]}", file=sys.stderr)
    finally:
        _mega_kernel._unsafe_update_src(src)
        _mega_kernel.device_caches.clear()
    return out


def main() -> int:
    triton.runtime.driver.set_active(Ahead())
    rows = []
    for size in ("small", "1b", "8b"):
        for batch in (1, 8):
            kernel, warps = compiled(size, batch)
            r = ptxas_v(kernel.asm["ptx"])
            regs_per_warp = -(-r["registers"] * 32 // 256) * 256
            per_sm = min(REGS_PER_SM // (regs_per_warp * warps), THREADS_PER_SM // (32 * warps))
            rows.append({"size": size, "batch": batch, "warps": warps, **r,
                         "shared_bytes": kernel.metadata.shared, "programs_per_sm": per_sm})
            print(f"{size} b{batch}: {rows[-1]}", file=sys.stderr)
    version = subprocess.run([ptxas(), "--version"], capture_output=True, text=True).stdout
    json.dump({"target": "sm_90a", "triton": triton.__version__,
               "ptxas": version.strip().splitlines()[-1], "torch": torch.__version__,
               "rows": rows, "without_each": {"size": "1b", "batch": 1,
                                              "rows": without_each("1b", 1)}},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
