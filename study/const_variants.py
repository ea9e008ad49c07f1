"""The constants docs/VARIANTS.md holds outside its generated blocks (doc_constants.py)."""

from .const_kinds import DESIGN, FORMULA, MATH, OPTION, SPEC, TOOL, VERSION, pinned

MODEL = "harness/model.py"
LLAMA_STEP = "harness/llama_step.py"
# the transformers the committed H200 runs recorded (their run.json's `versions`)
HF_RUNS = pinned("tests/data/runs/static/run.json", '"transformers": "5.17.0"')
WHILE = pinned("harness/cuda_loop.py", "MIN_DRIVER = 12030  # CUDA 12.3")

CONSTANTS = {
    "docs/VARIANTS.md": [
        ("(GPT-2 124M by default", SPEC),
        ("std 0.2, 0.05 for phi", OPTION + " (harness/model.py's tiny initialisation)"),
        ("1]` (column 0 is BOS)", FORMULA),
        ("(from 1) feeds the token at position i − 1", FORMULA),
        ("or `tiny` (2 layers, for the", SPEC),
        ("| `gpt2` | 12 | 768 | 12 / 12 | 50257 | tied | 50256, 50256 | 124.4M |", SPEC),
        ("| `llama` | 12 | 768 | 12 / 4 (GQA) | 32000 | untied | 1, 2 | 124.7M |", SPEC),
        ("| `qwen2` | 12 | 512 | 8 / 2 (GQA), QKV bias | 151936 | tied | 151643, 151645 | 137.6M |",
         SPEC),
        ("| `mistral` | 12 | 768 | 12 / 4 (GQA), no sliding window | 32768 | untied | 1, 2 | "
         "143.5M |", SPEC),
        ("| `phi` | 10 | 768 | 12 / 12, partial rotary 0.5 | 51200 | untied | 50256, 50256 | "
         "149.6M |", SPEC),
        ("| `llama:1b` | 16 | 2048 | 32 / 8 (GQA), llama3 rope | 128256 | tied | 128000, 128001 | "
         "1235.8M |", SPEC, pinned(MODEL, "hidden_size=2048, intermediate_size=8192")),
        ("| `llama:8b` | 32 | 4096 | 32 / 8 (GQA), rope theta 500000 | 128256 | untied | 128000, "
         "128001 | 8030.3M |", SPEC, pinned(MODEL, "hidden_size=4096, intermediate_size=14336")),
        ("(s_j ≥ 1 geometric", FORMULA),
        ("(50256): only emitted", SPEC + ": GPT-2's EOS token"),
        ("expandable segments: 1.0 when", MATH + ": the share's bounds"),
        ("started, below 1 when switched", MATH + ": the share's bounds"),
        ("0.0 when off", MATH + ": the share's bounds"),
        ("in transformers 5.17 StaticCache mutates", TOOL + " (the version the H200 runs "
         "recorded)", HF_RUNS),
        ("StaticCache (transformers 5.17) mutates", TOOL + " (the version the H200 runs "
         "recorded)", HF_RUNS),
        ("Step i runs on stream i % 2 after", FORMULA),
        ("needs step i−1's token", FORMULA),
        ("pinned slot i % 2 and", FORMULA),
        ("on step i−1's event (`event.synchronize()`) and only then reads slot (i−1) % 2.",
         FORMULA),
        ("slot (i−1) % 2 right after", FORMULA),
        ("by step i−3 (or the", FORMULA + ": the slot two steps back"),
        ("step i+1 is launched.", FORMULA),
        ("(`--k`, default 8).", OPTION, pinned("harness/config.py", "DEFAULT_K = 8")),
        ("rounded up to 16", OPTION, pinned("analysis/measures/floor_bytes.py",
                                            "SLOT_ALIGN = 16")),
        ("node-level captures at batch 32,", SPEC + ": the configuration of tests/data/runs",
         pinned("tests/data/runs/static/run.json", '"batch": 32')),
        ("in 13 ops a layer and 8 a step", DESIGN + " (tests/test_llama_steps.py)",
         pinned("tests/test_llama_steps.py", "test_graphed_step_launches_13_ops_a_layer_and_8_"
                                             "a_step")),
        ("cache keeps 8 extra columns", OPTION, pinned(LLAMA_STEP, "PAD = 8")),
        ("past `pos` and 0 up to it", FORMULA),
        ("column D is 1, so the", FORMULA),
        ("above batch 1 with more", FORMULA + ": one query row"),
        ("`[B, KV heads, T, D + 8]`", OPTION, pinned(LLAMA_STEP, "PAD = 8")),
        ("as for head dim 16 or 64)", SPEC),
        ("small size of all three and", DESIGN + ": llama, qwen2, mistral"),
        ("over slots 0..pos with an online softmax, 64 slots at", OPTION,
         pinned("harness/triton_ops.py", "BLOCK_T = 64")),
        ("tokens with 1–4 micro-batches (CPU", DESIGN + " (the CPU test's micro-batches)",
         pinned("tests/test_harness_variants.py", '"branches", [1, 2, 3, 4]')),
        ("step with 1, 3 and 8 micro-batches", DESIGN + " (the GPU test's micro-batches)",
         pinned("tests/test_gpu_harness.py", '"branches", [1, 3, 8]')),
        ("`harness/llama_kernels.py`): 5 Triton kernels", DESIGN),
        ("up to 16 rows", OPTION + " (harness/llama_ops.py: the GEMV path's limit)",
         pinned("harness/llama_ops.py", "GEMV_MAX_BATCH = 16")),
        ("program per 16-64 output columns", OPTION + " (harness/llama_ops.py)",
         pinned("harness/llama_ops.py", "A program per 16-64 output columns")),
        ("`pos` by the group's first head, softmax(q·K/√d)·V over slots 0..pos", FORMULA),
        ("5 L + 3 kernels a step", DESIGN),
        ("do. Above 16", OPTION, pinned("harness/llama_ops.py", "GEMV_MAX_BATCH = 16")),
        ("and `F.rms_norm`: 8 kernels a layer.", DESIGN),
        ("small size of all three families", DESIGN + ": llama, qwen2, mistral"),
        ("(GEMV path at batch 8, cuBLAS path forced at batch 8 and taken at batch 24)", DESIGN
         + " (tests/test_gpu_llama.py's batches)", pinned("tests/test_gpu_llama.py",
                                                           "def test_fused_gives_kv_tokens_at_"
                                                           "batch_24")),
        ("(16 layers of 2048, 32 query heads over 8 KV heads,", SPEC,
         pinned(MODEL, "hidden_size=2048, intermediate_size=8192")),
        ("SwiGLU 8192, 128256 tokens, tied, llama3 rope scaling) and Llama-3-8B's (32 layers of "
         "4096, 32 over", SPEC, pinned(MODEL, "hidden_size=4096, intermediate_size=14336")),
        ("8, SwiGLU 14336, 128256 tokens, rope theta 500000, untied)", SPEC,
         pinned(MODEL, "rope_theta=500000.0")),
        ("(4096 outputs alone", SPEC),
        ("its sum making the next layer's norm): eight kernels.", DESIGN),
        ("The three steps, measured", DESIGN + ": the three named just before"),
        ("(the shapes with 2 layers: tests/test_gpu_sizes.py)", OPTION,
         pinned("tests/test_gpu_sizes.py", "layers=2")),
        ("batch 1 and 8 (scripts/sizes-h200.sh peer)", OPTION,
         pinned("scripts/sizes-h200.sh", "--batches 1,8")),
        ("the three sizes, with", DESIGN + ": study/sizes.py's SIZES",
         pinned("study/sizes.py", 'SIZES = ("small", "1b", "8b")')),
        ("(CUDA 12.3+ conditional nodes;", VERSION, WHILE),
        ("than CUDA 12.3, one line", VERSION, WHILE),
        ("The handle starts at 1 at every", DESIGN, pinned("harness/cuda_loop.py",
                                                           "The handle is created with default 1")),
        ("body): those two kernels are", DESIGN),
        ("little-endian: two runs with the same hash", MATH + ": what equal hashes mean"),
        ("step START+1 to leaving", FORMULA),
        ("bench's default 5, each file", OPTION, pinned("harness/cli.py",
                                                 '"--repeats", type=int, default=5')),
        ("1 − peak allocated / peak reserved", FORMULA),
        ("a step of 8 ops a layer", DESIGN),
        ("5 copies of 1 GiB; 64 MiB on the CPU", OPTION + " (harness/bench.py)",
         pinned("harness/bench.py", "COPY_BYTES_CPU = 64 << 20")),
    ],
}
