import json, pathlib, sys, transformers
from analysis.capture import step_functions as sf
out = pathlib.Path(sys.argv[1])
d = pathlib.Path(transformers.__file__).parent
fs = sf.causal_lm_forwards(d)
text = ("t5", "mt5", "bart", "mbart", "pegasus", "marian", "blenderbot", "blenderbot_small", "umt5",
        "longt5", "switch_transformers", "prophetnet", "plbart", "m2m_100", "nllb_moe", "fsmt", "led",
        "bigbird_pegasus", "pegasus_x")
sets = {
    "new": fs,
    "old": [f for f in fs if "ForConditionalGeneration" not in f.qualname],
    "text": [f for f in fs if "ForConditionalGeneration" not in f.qualname or f.module.split(".")[2] in text],
    "llama": [f for f in fs if "llama.modeling_llama" in f.module],
}
for k, v in sets.items():
    sf.write_config(out / f"{k}.json", v)
    print(k, len(v), len({f.module for f in v}))
