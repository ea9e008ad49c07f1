"""Run by tests/test_harness_tp.py under torchrun (2 ranks, gloo): each case decoded with --tp 2
through the harness' own pieces, and the stop flag's agreement; rank 0 writes what it saw to
argv[1] as JSON: {"CASE": [sha of rank 0, sha of rank 1], "agree": [flag of rank 0, of rank 1]}.
Then, with more arguments, `harness run ARGS` in the same ranks (harness.cli.main, what
`torchrun -m harness run` calls; it joins the process group already set up and closes it): one
torchrun, each rank importing torch once, for both tests."""

import json
import sys

import torch
import torch.distributed as dist

from harness import tp
from harness.config import RunConfig, validate
from harness.instrument import no_window
from harness.run import load_model, make_decoder, tokens_sha256

CASES = [(m, v) for m in ("tiny", "llama:tiny") for v in ("static", "deferred")]


def main(out: str) -> None:
    tp.init(2, "cpu")
    seen = {}
    for name, variant in CASES:
        cfg = validate(RunConfig(variant=variant, model=name, batch=4, new_tokens=12,
                                 stop="uniform:4-9", device="cpu", matmul_precision="highest",
                                 tp=2))
        model = load_model(cfg)
        tp.shard(model, 2)
        sha = tokens_sha256(make_decoder(model, cfg)(no_window())["tokens"])
        shas = [None, None]
        dist.all_gather_object(shas, sha)
        seen[f"{name} {variant}"] = shas
    # Rank 0 finished, rank 1 not: both must read "not finished".
    flag = tp.agree(torch.tensor([tp.rank() == 0]))
    flags = [None, None]
    dist.all_gather_object(flags, bool(flag))
    seen["agree"] = flags
    if tp.rank() == 0:
        with open(out, "w") as f:
            json.dump(seen, f)


if __name__ == "__main__":
    main(sys.argv[1])
    if len(sys.argv) > 2:
        from harness.cli import main as harness_main

        sys.exit(harness_main(["run", *sys.argv[2:]]))
    tp.close()
