"""The analysis tools beside the capture scripts, run from the repository root (or with it on
PYTHONPATH) as modules: `python -m scripts.ranks RUN`, `python -m scripts.kineto_crosscheck RUN`,
`python -m scripts.hta_compare TRACE`. Not installed by pip: they are the project's own checks."""
