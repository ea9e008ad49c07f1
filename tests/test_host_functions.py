"""The host table's named code, found by reading source (analysis/capture/host_functions.py):
generate()'s functions in a transformers tree, the program's own modules import by import, and
what is left out (inherited methods, properties, generators, lazy imports, the steps)."""

import textwrap

from analysis.capture import host_functions as hf

UTILS = '''
class GenerationMixin:
    def generate(self): ...
    def _sample(self): ...
    @property
    def device(self): ...
    def stream(self):
        yield 1
class StopCheck:
    def __call__(self, x): ...
'''
PROCESS = '''
class LogitsProcessorList(list):
    def __call__(self, ids, scores): ...
class TopKLogitsWarper:
    def __call__(self, ids, scores): ...
class InheritsItsCall(TopKLogitsWarper):
    pass
'''
MODELING = '''
class LlamaPreTrainedModel:
    def forward(self): ...
class LlamaModel(LlamaPreTrainedModel):
    def forward(self, x): ...
class LlamaForCausalLM(LlamaPreTrainedModel):
    def forward(self, x): ...
'''


def write(root, files: dict):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_generate_functions_are_found_in_the_program_transformers(tmp_path):
    write(tmp_path, {"generation/utils.py": UTILS, "generation/logits_process.py": PROCESS,
                     "generation/stopping_criteria.py": "class MaxLengthCriteria:\n"
                                                        "    def __call__(self, ids): ...\n",
                     "cache_utils.py": "class DynamicLayer:\n    def update(self): ...\n",
                     "masking_utils.py": "def create_causal_mask(): ...\nsdpa_mask = len\n",
                     "models/llama/modeling_llama.py": MODELING})
    found = hf.transformers_functions(tmp_path)
    assert found == (
        "transformers.generation.utils:GenerationMixin.generate",
        "transformers.generation.utils:GenerationMixin._sample",
        "transformers.generation.utils:StopCheck.__call__",
        "transformers.generation.logits_process:LogitsProcessorList.__call__",
        "transformers.generation.logits_process:TopKLogitsWarper.__call__",
        "transformers.generation.stopping_criteria:MaxLengthCriteria.__call__",
        "transformers.cache_utils:DynamicLayer.update",
        "transformers.masking_utils:create_causal_mask",
        # The base model's forward; the causal LM's is nsys's (the steps).
        "transformers.models.llama.modeling_llama:LlamaModel.forward")


OWN = {
    "main.py": """
        import mymod
        from pkg import sub
        def later():
            import lazy_mod
        """,
    "mymod.py": """
        import torch
        class Model:
            def forward(self, x): ...
            def __init__(self): ...
            def __call__(self, x): ...
            @property
            def size(self): ...
        def sample(x): ...
        def tokens():
            yield 1
        async def serve(): ...
        """,
    "pkg/__init__.py": "from .helpers import norm\n",
    "pkg/helpers.py": "def norm(x): ...\n",
    "pkg/sub.py": "def step(x): ...\n",
    "lazy_mod.py": "def never(): ...\n",
}


def test_the_program_own_modules_are_followed_import_by_import(tmp_path):
    write(tmp_path, OWN)
    modules = [name for name, _ in hf.own_modules(("python", "main.py"), tmp_path)]
    assert modules == ["mymod", "pkg", "pkg.sub", "pkg.helpers"]
    # Not: __init__, the property, the generator, the coroutine, a lazy import's module.
    assert hf.own_functions(("python3", "-u", "main.py", "--x"), tmp_path) == [
        "mymod:sample", "mymod:Model.__call__", "mymod:Model.forward", "pkg.sub:step",
        "pkg.helpers:norm"]


def test_a_package_run_with_dash_m_starts_at_its_main(tmp_path):
    write(tmp_path, {"app/__main__.py": "from .cli import go\n", "app/cli.py": "def go(): ...\n",
                     "app/__init__.py": ""})
    assert hf.own_functions(("python", "-m", "app"), tmp_path) == ["app.cli:go"]
    assert hf.own_functions(("python", "-c", "print(1)"), tmp_path) == []


def test_the_steps_are_not_named_twice_and_torch_token_choice_always_is(tmp_path):
    write(tmp_path, OWN)
    names = hf.host_functions(("python", "main.py"), tmp_path, None, ("extra:f",),
                              ("pkg.sub:step",))
    assert names[:3] == ["extra:f", "torch:multinomial", "torch:argmax"]
    assert "pkg.sub:step" not in names and "mymod:sample" in names


def test_an_encoder_decoder_is_a_generating_model_and_its_decoder_is_named(tmp_path):
    """T5's generate() runs the encoder once and T5ForConditionalGeneration.forward once a token
    (a step each, as a causal LM's); its decoder, T5Stack, and Bart's BartDecoder are named
    inside it, the decoder's layers are not."""
    from analysis.capture.step_functions import causal_lm_forwards

    write(tmp_path, {"models/t5/modeling_t5.py": '''
        class T5PreTrainedModel:
            def forward(self): ...
        class T5Stack(T5PreTrainedModel):
            def forward(self, x): ...
        class T5ForConditionalGeneration(T5PreTrainedModel):
            def forward(self, x): ...
        ''', "models/bart/modeling_bart.py": '''
        class BartDecoderLayer(Module):
            def forward(self, x): ...
        class BartDecoder(BartPreTrainedModel):
            def forward(self, x): ...
        class BartForConditionalGeneration(BartPreTrainedModel):
            def forward(self, x): ...
        ''', "models/llava/modeling_llava.py": '''
        class LlavaForConditionalGeneration(LlavaPreTrainedModel):
            def forward(self, x): ...
        '''})
    # Not a vision model's: all of transformers' ConditionalGeneration forwards in one trace
    # file left the H200's nsys recording no NVTX at all (step_functions.ENCODER_DECODERS).
    assert [f.spec for f in causal_lm_forwards(tmp_path)] == [
        "transformers.models.bart.modeling_bart:BartForConditionalGeneration.forward",
        "transformers.models.t5.modeling_t5:T5ForConditionalGeneration.forward"]
    assert hf.base_model_forwards(tmp_path) == [
        "transformers.models.bart.modeling_bart:BartDecoder.forward",
        "transformers.models.t5.modeling_t5:T5Stack.forward"]
