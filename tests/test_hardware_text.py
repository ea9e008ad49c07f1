"""The hardware view's text table with labels too long for 100 columns: numbered, a legend below."""

import pandas as pd

from analysis.render import hardware


def test_long_labels_become_numbers_and_a_missing_config_label_is_left_out():
    table = pd.DataFrame([
        {"label": "a" * 95, "config_label": float("nan"), "steps": 20,
         "untraced_ms_per_step": 2.0, "speed_vs_first": 1.0},
        {"label": "b" * 95, "config_label": "fused b1 bf16", "steps": 20,
         "untraced_ms_per_step": 0.5, "speed_vs_first": 4.0},
    ])
    lines = hardware.to_text(table).splitlines()
    assert lines[3].split() == ["#1", "20", "2.000", "1.00x", "–", "–", "–", "–", "–", "–", "–"]
    assert lines[4].split()[:4] == ["#2", "20", "0.500", "4.00x"]
    assert lines[5] == "#1: " + "a" * 95  # 99 columns: no config label (NaN), not cut
    assert lines[6] == ("#2: " + "b" * 95)[:99] + "…"
    assert max(map(len, lines)) <= 100
