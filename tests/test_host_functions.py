"""The host table's named code, found by reading source (analysis/capture/host_functions.py):
generate()'s functions in a transformers tree, and what is left out (inherited methods,
properties, generators, the steps). The program's own code the hook finds as it is imported
(tests/test_own_code.py)."""

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


def test_the_steps_are_not_named_twice_and_torch_token_choice_always_is():
    names = hf.host_functions(None, ("extra:f", "pkg.sub:step"), ("pkg.sub:step",))
    assert names == ["extra:f", "torch:multinomial", "torch:argmax"]


def test_speculative_decoding_names_the_candidate_generators_and_their_drafts(tmp_path):
    write(tmp_path, {"generation/utils.py": UTILS.replace(
        "def _sample(self): ...", "def _sample(self): ...\n    def _assisted_decoding(self): ..."),
        "generation/candidate_generator.py": """
            class CandidateGenerator:
                def get_candidates(self, ids): ...
                def update_candidate_strategy(self, ids, scores, num_matches): ...
            class AssistedCandidateGenerator(CandidateGenerator):
                def get_candidates(self, ids): ...
            class Prompts(CandidateGenerator):
                pass
            """})
    found = hf.transformers_functions(tmp_path)
    assert "transformers.generation.utils:GenerationMixin._assisted_decoding" in found
    assert hf.draft_functions(str(tmp_path)) == [
        "transformers.generation.candidate_generator:CandidateGenerator.get_candidates",
        "transformers.generation.candidate_generator:AssistedCandidateGenerator.get_candidates"]
    assert ("transformers.generation.candidate_generator:"
            "CandidateGenerator.update_candidate_strategy") in found
    assert hf.draft_functions(None) == []


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
