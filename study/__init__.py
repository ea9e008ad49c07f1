"""The project's own study, apart from the library: docs/RESULTS.md, its figures and README's
findings from the committed run directories (results.py and its parts), the profiler's share
(observer.py, overhead.py) and the analysis' speed benchmark (benchmark.py)."""
