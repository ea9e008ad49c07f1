"""Two decode loops side by side in one process: two Python threads, each with its own model and
CUDA stream, each marking its tokens `Step N` with NVTX (the numbers shared between threads).

    gapscope profile --range all -- python examples/two_threads.py

The analysis keeps one step sequence per thread: periods and bubbles are measured within a
thread's own steps (two interleaved sequences read as one would give negative periods).
"""

import argparse
import contextlib
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nvtx  # noqa: E402
import torch  # noqa: E402
import toy_lm  # noqa: E402


def decode_thread(seed: int, args, device: str, barrier: threading.Barrier) -> None:
    torch.manual_seed(seed)
    shape = dict(vocab=1024, dim=64, layers=2, heads=4, ffn=128) if args.tiny else {}
    with torch.device(device):
        model = toy_lm.ToyLM(batch=args.batch, max_len=16 + args.new_tokens, **shape).eval()
    stream = torch.cuda.Stream() if device == "cuda" else None
    prompt = torch.randint(0, 1024, (args.batch, 16), device=device)
    barrier.wait()
    on_stream = torch.cuda.stream(stream) if stream else contextlib.nullcontext()
    with torch.inference_mode(), on_stream:
        token = toy_lm.prefill(model, prompt, None)
        input_pos = torch.tensor([16], device=device)
        for i in range(1, args.new_tokens):
            with nvtx.annotate(f"Step {i}"):
                token = toy_lm.decode_one_token(model, token.clone(), input_pos)
                input_pos += 1
                if (token == 2).all().item():
                    break


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--new-tokens", type=int, default=60)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    barrier = threading.Barrier(args.threads)
    threads = [threading.Thread(target=decode_thread, args=(seed, args, args.device, barrier),
                                name=f"decode-{seed}") for seed in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"two_threads: {args.threads} threads decoded {args.new_tokens} tokens each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
