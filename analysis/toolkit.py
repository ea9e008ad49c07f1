"""The library's second public face: the building blocks that its CLI composes and that the
project's own study (study/, beside the library, not in the wheel) reads captures with. A
notebook wants `analysis` (load, open_devices, compare, Database); a program that makes its own
tables and figures from many captures wants these too.

    import analysis.toolkit as kit
    kit.run_dirs(root)                       # the run directories under a directory
    kit.open_all(paths, kit.Options())       # each opened and analysed, in parallel threads
    kit.analyze(kit.load_trace(path))        # [Analysis], one a device, of one export
    kit.frame_md_table(df), kit.median(xs)   # the one Markdown table, the one median

Each name is kept where it is defined and loaded when first used (no pandas or matplotlib at
`import analysis.toolkit`). These, and `analysis`'s own names, are what the study may import
(tests/test_layers.py checks it); anything else in analysis/ is the library's own business.
"""

import importlib

# name -> "module:attribute", the one place each is defined.
NAMES = {
    # captures and run directories
    "load_trace": "analysis.readers:load_trace",
    "trace_in": "analysis.readers.runs:trace_in",
    "TRACE_NAMES": "analysis.readers.runs:TRACE_NAMES",
    "plain": "analysis.readers.compressed:plain",
    "read_untraced_steps": "analysis.readers.untraced:read_untraced_steps",
    "read_full_names": "analysis.readers.nsys:read_full_names",
    "run_dirs": "analysis.sweep:run_dirs",
    "open_all": "analysis.sweep:open_all",
    "EXPORT_TIMEOUT_S": "analysis.capture.nsys:EXPORT_TIMEOUT_S",
    # measures
    "analyze": "analysis.measures.summary:analyze",
    "Options": "analysis.measures.summary:Options",
    "median": "analysis.measures.stats:median",
    "untraced_summary": "analysis.measures.untraced:untraced_summary",
    "kernel_table": "analysis.measures.kernels:kernel_table",
    "op_names": "analysis.measures.kernels:op_names",
    "step_row": "analysis.measures.kernels:step_row",
    "STEP_ROW": "analysis.measures.kernels:STEP_ROW",
    "run_shape": "analysis.measures.floor_bytes:run_shape",
    "step_bytes": "analysis.measures.floor_bytes:step_bytes",
    "class_bytes": "analysis.measures.floor_bytes:class_bytes",
    "recorded_bytes_per_step": "analysis.measures.floor_bytes:recorded_bytes_per_step",
    "run_step_bytes": "analysis.measures.floor_bytes:run_step_bytes",
    "FORWARD_GRAPH": "analysis.measures.host_bound:FORWARD_GRAPH",
    "FORWARD_PYTHON": "analysis.measures.host_bound:FORWARD_PYTHON",
    # tables and figures
    "frame_md_table": "analysis.render.markdown:frame_md_table",
    "hardware_table": "analysis.render.hardware:hardware_table",
    "new_figure": "analysis.render.plots:new_figure",
    "plot_analysis": "analysis.render.plots:plot_analysis",
    "plot_hardware": "analysis.render.plots_runs:plot_hardware",
    "plot_bubbles": "analysis.render.plots_runs:plot_bubbles",
    # commands over the library: click's command with gapscope's one-line errors (exit 2), the
    # results database written with the line the CLI says
    "Command": "analysis.cli.base:Command",
    "store_runs": "analysis.cli.db:store_runs",
    # outputs that never touch an input (analysis/outputs.py): the checks the CLI makes first
    "force_option": "analysis.cli.base:force_option",
    "input_files": "analysis.cli.base:input_files",
    "check_outputs": "analysis.cli.base:check_outputs",
    "said": "analysis.cli.base:said",
    "check_input": "analysis.outputs:check_input",
    "check_output": "analysis.outputs:check_output",
}

__all__ = sorted(NAMES)


def __getattr__(name: str):
    if name not in NAMES:
        raise AttributeError(f"module 'analysis.toolkit' has no attribute {name!r}")
    module, _, attr = NAMES[name].partition(":")
    # relative to this package, so that an installed gapscope.analysis finds its own modules
    package = __package__ or "analysis"
    value = getattr(importlib.import_module(package + module.removeprefix("analysis")), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *__all__})
