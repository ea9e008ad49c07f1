"""Old names kept readable for one release (docs/METRICS.md, "Glossary"; CHANGELOG.md).

A column or summary key renamed so that one name means one quantity stays readable under its
old name until the next release: `a.steps["gpu_start"]` returns `gpu_start_ns` with a
FutureWarning that names the new one; `a.summary["gpu_util"]` likewise. The library's tables are
`Table`s (pandas DataFrames that know their old names) and its summary a `Summary`; anything
derived from them (a selection, a merge) is a plain DataFrame under the new names. Outputs
(JSON, CSV, Markdown, the database) carry the new names only; a database written before is read
back under them (renamed_frame, renamed_summary).
"""

import warnings

import pandas as pd

# table -> {old column: new column}
COLUMNS = {
    "steps": {"cpu_start": "cpu_start_ns", "cpu_end": "cpu_end_ns",
              "gpu_start": "gpu_start_ns", "gpu_end": "gpu_end_ns",
              "idle_wait_ns": "idle_blocked_ns", "idle_host_ns": "idle_pre_launch_ns",
              "idle_launch_ns": "idle_in_launch_ns"},
    "gaps": {"wait_ns": "idle_blocked_ns", "host_ns": "idle_pre_launch_ns",
             "launch_ns": "idle_in_launch_ns"},
    "ops": {"start": "start_ns", "end": "end_ns", "call_start": "call_start_ns",
            "call_end": "call_end_ns"},
    "host_steps": {"host_start": "host_start_ns", "host_end": "host_end_ns"},
}
# summary key -> new key (a nested dict's keys: "idle_ledger.wait_ns" -> "blocked")
SUMMARY = {
    "gpu_util": "busy_share_of_window",
    "sync_idle_share": "sync_idle_share_of_window",
    "idle_ledger.wait_ns": "blocked", "idle_ledger.host_ns": "pre_launch",
    "idle_ledger.launch_ns": "in_launch",
}


def _said(old: str, new: str, where: str) -> None:
    warnings.warn(f"{where} {old!r} is now {new!r} (CHANGELOG.md); the old name goes in the "
                  "next release", FutureWarning, stacklevel=3)


class Table(pd.DataFrame):
    """A DataFrame of the library's that reads a renamed column under its old name too, with a
    FutureWarning (COLUMNS)."""

    _metadata = ["_renamed", "_table"]

    @property
    def _constructor(self):
        return pd.DataFrame  # what is made from it is plain, under the new names

    def _new(self, key):
        renamed = getattr(self, "_renamed", None) or {}
        if isinstance(key, str) and key in renamed and key not in self.columns:
            _said(key, renamed[key], f"{self._table} column")
            return renamed[key]
        if isinstance(key, list):
            return [self._new(k) for k in key]
        return key

    def __getitem__(self, key):
        return super().__getitem__(self._new(key))

    def __getattr__(self, name):
        renamed = object.__getattribute__(self, "__dict__").get("_renamed") or {}
        if name in renamed:
            return self[name]
        return super().__getattr__(name)


def table(frame: pd.DataFrame | None, name: str) -> pd.DataFrame | None:
    """The frame as a Table of `name` (COLUMNS' key); None stays None."""
    if frame is None or isinstance(frame, Table):
        return frame
    out = Table(frame)
    out._renamed = {old: new for old, new in COLUMNS.get(name, {}).items()
                    if new in frame.columns}
    out._table = name
    return out


class Summary(dict):
    """The summary dict, its renamed keys readable under their old names with a FutureWarning
    (SUMMARY); a nested dict renamed in part is one too."""

    def __init__(self, value=(), prefix: str = ""):
        super().__init__(value)
        self._prefix = prefix
        for key, v in list(self.items()):
            if isinstance(v, dict) and any(k.startswith(f"{prefix}{key}.") for k in SUMMARY):
                dict.__setitem__(self, key, Summary(v, f"{prefix}{key}."))

    def __missing__(self, key):
        new = SUMMARY.get(f"{self._prefix}{key}")
        if new is None or new not in self:
            raise KeyError(key)
        _said(key, new, f"summary key {self._prefix}" if self._prefix else "summary key")
        return self[new]

    def get(self, key, default=None):
        return self[key] if key in self or f"{self._prefix}{key}" in SUMMARY and \
            SUMMARY[f"{self._prefix}{key}"] in self else default


def renamed_frame(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """A table read back from a database written before the rename, under the new names."""
    renames = {old: new for old, new in COLUMNS.get(name, {}).items()
               if old in frame.columns and new not in frame.columns}
    return frame.rename(columns=renames) if renames else frame


def renamed_summary(summary: dict) -> dict:
    """A summary stored before the rename, under the new keys (nested ones too)."""
    out = dict(summary)
    for old, new in SUMMARY.items():
        head, _, tail = old.partition(".")
        if tail and isinstance(out.get(head), dict) and tail in out[head]:
            out[head] = {(new if k == tail else k): v for k, v in out[head].items()}
        elif not tail and old in out and new not in out:
            out = {(new if k == old else k): v for k, v in out.items()}
    return out
