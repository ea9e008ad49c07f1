"""GPU metrics: the reader, time-weighted means (a sample straddling two steps), a capture without
a CUDA trace, and the real H200 metrics capture."""

import json
from pathlib import Path

import golden
import numpy as np
import pytest
from click.testing import CliRunner
from synth import SM, causes_trace, metrics_only_trace

from analysis.cli import main
from analysis.measures.gpu_metrics import Series
from analysis.measures.summary import analyze, analyze_metrics
from analysis.readers import load_trace
from analysis.render.plots import analysis_figure, plot_analysis

DATA = Path(__file__).parent / "data"
FUSED_METRICS = DATA / "runs" / "fused-metrics"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_sample_covers_the_interval_since_the_previous_one():
    # (0,100] at 10, (100,200] at 50, (200,300] at 90; the sample at 0 covers nothing known.
    s = Series(np.array([0, 100, 200, 300]), np.array([99.0, 10, 50, 90]))
    # [50,150]: 50 ns at 10 and 50 ns at 50 (the sample at 200 straddles both steps).
    # [150,300]: 50 ns at 50, 100 ns at 90 -> 11500 / 150.
    np.testing.assert_allclose(s.mean([50, 150, 50], [150, 300, 300]),
                               [30.0, 11500 / 150, 14500 / 250])
    # Inside one sample's interval: that sample's value; outside every interval: unknown.
    np.testing.assert_allclose(s.mean([110], [120]), [50.0])
    assert np.isnan(s.mean([400], [500])[0]) and np.isnan(s.mean([-50], [0])[0])


def test_a_capture_without_a_cuda_trace_is_read_for_its_metrics(tmp_path):
    path = metrics_only_trace().write(tmp_path / "m.sqlite", drop=("CUPTI_ACTIVITY_KIND_RUNTIME",))
    trace = load_trace(path)
    assert trace.ops.empty and trace.blocking.empty
    assert set(trace.gpu_metrics["device"]) == {0}  # typeId 0x10A00: the GPU in the low byte
    assert trace.dram_peaks == {0: (4.8e12, "datasheet peak of the NVIDIA H200")}
    [a] = analyze_metrics(trace)
    np.testing.assert_allclose(a.steps["sm_active_pct"], [30.0, 11500 / 150])
    np.testing.assert_allclose(a.steps["dram_read_gbps"], [960.0, 960.0])
    np.testing.assert_allclose(a.steps["dram_write_pct"], [3.0, (50 * 4 + 100 * 6) / 150])
    m = a.summary["gpu_metrics"]
    assert m["sm_active_pct"] == pytest.approx(58.0)  # (50*10 + 100*50 + 100*90) / 250
    assert m["gr_active_pct"] == pytest.approx((150 * 100 + 100 * 80) / 250)
    assert m["tensor_active_pct"] is None  # not sampled
    assert m["dram_peak_gbps"] == 4800 and m["samples"] == 3 and m["interval"] == "nvtx range"
    assert a.summary["cuda_trace"] is False and a.summary["window_ns"] == 250


def test_analyze_picks_the_metrics_only_analysis_and_says_so(tmp_path):
    path = metrics_only_trace().write(tmp_path / "m.sqlite", drop=("CUPTI_ACTIVITY_KIND_RUNTIME",))
    text = run("analyze", path)
    assert text.exit_code == 0, text.output
    assert "GPU metrics only: no CUDA trace, so no gap analysis" in text.output
    assert "SMs active 58.0%" in text.output and "read 20.0% (960 GB/s)" in text.output
    assert max(len(line) for line in text.output.splitlines()) <= 100
    out = json.loads(run("analyze", path, "--format", "json").output)
    assert set(out) == {"summary", "steps"}
    assert out["steps"]["sm_active_pct"][0] == 30  # columnar
    md = run("analyze", path, "--format", "md")
    assert md.exit_code == 0, md.output
    # The window's time-weighted means (write: (50 x 2 + 100 x 4 + 100 x 6) / 250 = 4.4%, of
    # 4800 GB/s), then per step (GR active in step 2: (50 x 100 + 100 x 80) / 150).
    assert [golden.row(md.output, k) for k in ("gr_active %", "sm_active %", "tensor_active %",
                                                "dram_write %", "dram_write GB/s", "samples")] == [
        [92], [58], [None], [4.4], [211.2], [3]]
    # Each step in the host table (µs), then in the metrics table.
    assert golden.rows(md.output, "1") == [[0.1], [100, 30, None, 20, 3, 960]]
    assert golden.rows(md.output, "2") == [[0.1], [86.7, 76.7, None, 20, 5.3, 960]]
    png = tmp_path / "m.png"
    assert run("analyze", path, "--plot", png).exit_code == 0
    assert golden.png_size(png) == (1430, 495)  # the metrics panel alone, 13 x 4.5 in at 110 dpi
    # Its lines: the per-step metrics above, in % of peak.
    (ax,) = analysis_figure(analyze_metrics(load_trace(path))[0], "m").axes
    lines = {line.get_label(): line.get_ydata().tolist() for line in ax.get_lines()}
    assert list(lines) == ["SMs active", "DRAM read", "DRAM write"]
    np.testing.assert_allclose(lines["SMs active"], [30.0, 11500 / 150])
    np.testing.assert_allclose(lines["DRAM read"], [20.0, 20.0])
    np.testing.assert_allclose(lines["DRAM write"], [3.0, (50 * 4 + 100 * 6) / 150])
    # compare shows it in the hardware table (tests/test_hardware_compare.py); so does report,
    # with its per-step metrics and figure, and no gap comparison (it has no gaps).
    reported = run("report", path, "-o", tmp_path / "r")
    assert reported.exit_code == 0, reported.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| run | steps | untraced ms |" in md and golden.starts(md, "m", 2) == [[2, None]]
    assert "GPU metrics only (no CUDA trace): no gap analysis." in md
    assert "GPU period ms/step" not in md and (tmp_path / "r" / "m-device0.png").is_file()
    perfetto = run("analyze", path, "--perfetto", tmp_path / "m.json")
    assert perfetto.exit_code == 2 and "has no timeline" in perfetto.output


def test_metrics_with_a_cuda_trace_average_over_each_steps_gpu_span(tmp_path):
    t = causes_trace()  # Step 1's ops run [20,60], Step 2's [95,150] (k5 is unattributed)
    for ts, v in ((0, 0), (40, 20), (100, 60), (160, 100)):
        t.sample(ts, SM, v, device=0)
    t.gpus.append((0, "some GPU", 2_000_000_000_000))
    [a] = analyze(load_trace(t.write(tmp_path / "c.sqlite")))
    # Step 1 [20,60]: 20 ns at 20, 20 ns at 60; Step 2 [95,150]: 5 ns at 60, 50 ns at 100.
    np.testing.assert_allclose(a.steps["sm_active_pct"], [40.0, 5300 / 55])
    m = a.summary["gpu_metrics"]
    assert m["sm_active_pct"] == pytest.approx(9000 / 130)  # window [20,150]
    assert m["dram_read_pct"] is None and m["dram_read_gbps"] is None
    assert m["dram_peak_gbps"] == 2000
    assert m["dram_peak_source"] == "TARGET_INFO_GPU.memoryBandwidth"
    assert m["interval"] == "gpu span"
    assert a.summary["idle_ns"] == 130 - 53  # the gap analysis is unchanged (k5 too is busy)
    # The companion panel under the bars: a sixth axes (overview, zoom, bars, histogram, the
    # host table's, then it), SMs active per step (no DRAM series).
    fig = analysis_figure(a, "with metrics")
    assert len(fig.axes) == 6
    (line,) = fig.axes[5].get_lines()
    np.testing.assert_allclose(line.get_ydata(), [40.0, 5300 / 55])
    plot_analysis(a, "with metrics", tmp_path / "c.png")
    assert golden.png_size(tmp_path / "c.png") == (1430, 1980)  # 13 x 18 in: five rows


def test_a_trace_without_metrics_has_none(data_dir):
    [a] = analyze(load_trace(data_dir / "h200-eager-static-bs16.sqlite.xz"))
    assert a.summary["gpu_metrics"] is None and "sm_active_pct" not in a.steps.columns


def test_samples_of_another_gpu_are_not_this_ones(tmp_path):
    t = causes_trace()
    for ts, v in ((0, 0), (200, 50)):
        t.sample(ts, SM, v, device=1)
    [a] = analyze(load_trace(t.write(tmp_path / "c.sqlite")))
    assert a.summary["gpu_metrics"] is None


def test_the_real_fused_metrics_capture():
    trace = load_trace(FUSED_METRICS / "capture.sqlite.xz")
    assert trace.ops.empty and not trace.gpu_metrics.empty
    [a] = analyze_metrics(trace)
    m = a.summary["gpu_metrics"]
    # fused, batch 32, steps 21-30 captured by the NVTX range `gapscope window` with no CUDA
    # trace (tests/data/README.md): 118 samples at 20 kHz over the ten NVTX steps.
    assert (a.summary["steps"], m["samples"], m["sample_period_ns_median"]) == (10, 118, 50016)
    assert {"gr_active", "sm_active", "dram_read", "dram_write"} <= set(m["metrics"])
    assert (m["dram_peak_gbps"], m["dram_peak_source"]) == (4814.304,
                                                            "TARGET_INFO_GPU.memoryBandwidth")
    assert round(m["gr_active_pct"], 2) == 96.04 and round(m["sm_active_pct"], 2) == 55.37
    assert round(m["dram_read_pct"], 2) == 17.86 and round(m["dram_read_gbps"], 1) == 859.6
    assert a.steps["sm_active_pct"].round(2).tolist()[:3] == [28.02, 57.70, 57.94]
