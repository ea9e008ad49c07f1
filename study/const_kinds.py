"""The kinds of constant a document may hold outside a generated block (doc_constants.py), each
a reason that is not a measurement; and `pinned`, the file and the text in it that fix a
constant's value, which `publish --check` reads (check.py)."""

OPTION = "an option's default or a threshold of the code"
SPEC = "a model's size from its config (harness/model.py), not a measurement"
DESIGN = "a count of the step as written (tests/test_llama_steps.py and the kernels' code)"
EXAMPLE = "a worked example on a synthetic trace, asserted by the test it names"
MATH = "the arithmetic of the definition"
DATASHEET = "NVIDIA's datasheet peak (readers/gpu_metrics.py's table)"
CONFIG = "the configuration the committed capture was made with (its run.json)"
CONTRACT = "the exit statuses of the house's contract (analysis/cli/base.py: 2 bad input)"
VERSION = "a version the code pins"
FORMULA = "the arithmetic of a definition, its variables named"
DESIGN_TEST = "a count of the code as written, asserted by the test named"
FIXTURE = "a fact of a committed fixture, asserted by the test it is pinned to"
COMMAND = "a command's own arguments, as one types them"
TOOL = "how a tool behaves, as its documentation or the code that reads its output says"


def pinned(path: str, text: str) -> tuple:
    """The file of the repository and the text in it that fix a constant: `--check` fails once
    the file no longer holds the text (the code changed under the document)."""
    return (path, text)
