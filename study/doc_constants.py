"""The figures the documents may hold outside a generated block (figures.py): each a constant,
not a measurement, listed by a phrase of its file that holds it (on one line) and why it is one
(const_kinds.py); where the code fixes its value, the file and text that do (`pinned`): `publish
--check` fails when a phrase is no longer in its file or a pin no longer in its code.

Kinds of constant: a threshold or an option's default (the code's: say which, pinned where it
can be), a model's shape or size from its config, a version the code pins, a datasheet's figure,
the arithmetic of a definition, a worked example on a synthetic trace that a test asserts, a count
of the code or a fact of a committed fixture that a test asserts (pinned to the test), the exit
statuses of the house's contract, a command's own arguments. A measured figure (a time, a share,
a count of what a capture holds, a ratio of runs, the version a run used) is never one: it goes in
a generated block (blocks.py), made from the committed file it was measured in.

One module a document (or a group of small ones), merged here.
"""

from . import (
    const_analysis,
    const_data,
    const_metrics,
    const_profiling,
    const_readme,
    const_variants,
)

CONSTANTS: dict = {}
for _module in (const_readme, const_analysis, const_metrics, const_profiling, const_variants,
                const_data):
    for _doc, _entries in _module.CONSTANTS.items():
        CONSTANTS.setdefault(_doc, []).extend(_entries)
