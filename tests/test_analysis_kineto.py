"""The Kineto reader on hand-built torch.profiler traces (tests/synth_kineto.py): the same numbers
as the nsys reader on the same drawing, exact ns, flows, ProfilerStep#N, graphs, bad input."""

import gzip
import hashlib
import json

import pytest
from click.testing import CliRunner
from synth import PID, TID, Synth, causes_trace
from synth_kineto import KinetoSynth, from_synth

from analysis.cli import main
from analysis.errors import TraceError
from analysis.measures.summary import Options, analyze
from analysis.readers import kineto, load_trace, nsys, reader_for


def analyse(path, **options):
    return analyze(load_trace(path), Options(**options))


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_the_causes_drawing_gives_the_same_numbers_from_both_readers(tmp_path, name):
    (from_nsys,) = analyse(causes_trace().write(tmp_path / "t.sqlite"))
    path = from_synth(causes_trace()).write(tmp_path / name)
    assert reader_for(path) is kineto
    (a,) = analyse(path)
    # The worked numbers of test_analysis_synthetic, now read from µs with three decimals.
    assert list(a.gaps["cause"]) == ["host", "sync", "queued", "unknown", "host"]
    assert list(a.gaps["idle_blocked_ns"]) == [0, 20, 0, 0, 0]
    assert a.summary["idle_ns_by_cause"] == {"sync": 35, "host": 32, "queued": 5, "unknown": 5}
    assert a.summary == from_nsys.summary
    for table in ("steps", "gaps", "streams", "checks"):
        assert getattr(a, table).equals(getattr(from_nsys, table)), table
    assert list(a.gaps["next_op"]) == ["k2", "k3", "k4", "k5", "k6"]


def test_times_are_exact_ns_where_a_float_would_round(tmp_path):
    # Absolute µs since 1970 (older Kineto): 19 digits, more than a float64 holds.
    t = KinetoSynth()
    base = 1712195495505582988
    t.range("Step 1", base, base + 1_001)
    t.launch(base + 1, base + 3, base + 5, base + 999)
    (a,) = analyse(t.write(tmp_path / "t.json"))
    assert float("1712195495505582.988") * 1000 != base  # what json's float would give
    assert (a.ops["start_ns"][0], a.ops["end_ns"][0]) == (base + 5, base + 999)
    assert a.summary["busy_ns"] == 994 and a.steps["cpu_ns"][0] == 1_001


def test_whole_microsecond_times_of_older_kineto(tmp_path):
    t = KinetoSynth(whole_us=True)
    t.range("Step 1", 0, 50_000)
    t.launch(1_000, 3_000, 5_000, 9_000)
    t.launch(4_000, 6_000, 12_000, 13_000)
    path = t.write(tmp_path / "t.json")
    (a,) = analyse(path)
    assert list(a.gaps["gap_ns"]) == [3_000] and list(a.gaps["cause"]) == ["queued"]
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.output.startswith(
        "t: device 0, 1 steps, torch.profiler trace schema 1, all times in whole µs\n")


def test_ops_and_calls_without_correlation_args_are_matched_by_their_ac2g_flow(tmp_path):
    t = KinetoSynth()
    t.range("Step 1", 0, 100)
    t.call("cudaLaunchKernel", 10, 15, corr=5, correlation_arg=False, flow=True)
    t.op(5, 20, 30, correlation_arg=False, flow=True)
    t.call("cudaLaunchKernel", 40, 45, corr=6)
    t.op(6, 50, 60, correlation_arg=False)  # no flow either: no launch call
    trace = load_trace(t.write(tmp_path / "t.json"))
    assert list(trace.ops["corr"]) == [5, -1]
    assert list(trace.ops["call_start"]) == [10, -1]


def test_profiler_steps_are_the_default_steps_when_no_step_range_exists(tmp_path):
    t = KinetoSynth()
    t.range("ProfilerStep#7", 0, 50)
    t.range("ProfilerStep#8", 50, 100)
    t.range("Model Forward", 1, 40)
    t.launch(10, 15, 20, 30)
    t.launch(60, 65, 70, 80)
    (a,) = analyse(t.write(tmp_path / "t.json"))
    assert list(a.steps["step"]) == [7, 8] and list(a.steps["name"]) == [
        "ProfilerStep#7", "ProfilerStep#8"]
    t.range("Step 1", 0, 100)  # a Step N range wins over them
    (b,) = analyse(t.write(tmp_path / "u.json"))
    assert list(b.steps["step"]) == [1] and list(b.steps["ops"]) == [2]
    with pytest.raises(TraceError, match="no NVTX range matches the steps pattern"):
        analyse(tmp_path / "t.json", step_pattern=r"^Iteration (\d+)$")


def test_a_graph_launch_is_one_op_of_three_records_and_syncs_block(tmp_path):
    t = KinetoSynth()
    t.range("Step 1", 0, 200)
    corr = t.call("cudaGraphLaunch", 10, 20)
    for start in (30, 50, 70):  # Kineto records the graph's kernels with the launch's id
        t.op(corr, start, start + 10, name="graph_kernel")
    t.call("cudaStreamSynchronize", 25, 120)
    t.launch(130, 135, 140, 150, api="cuLaunchKernel", name="triton_")  # Triton: driver API
    t.range("Step 1", 0, 200, cat="gpu_user_annotation", pid=0, tid=7)  # GPU row: not a range
    t.events.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7,
                     "ts": "@0.080@", "dur": "@0.040@", "args": {"correlation": 99}})
    trace = load_trace(t.write(tmp_path / "t.json"))
    assert list(trace.blocking["name"]) == ["cudaStreamSynchronize"]
    assert len(trace.ranges) == 1
    (a,) = analyze(trace)
    assert list(a.steps["ops"]) == [2] and list(a.steps["op_records"]) == [4]
    assert list(a.gaps["cause"]) == ["queued", "queued", "sync"]
    assert list(a.gaps["idle_blocked_ns"]) == [0, 0, 40]  # drained at 80, host back at 120
    assert a.summary["ops_without_launch_call"] == 0
    assert set(a.gaps["next_op"]) == {"graph_kernel", "triton_"}


def test_two_threads_keep_their_own_steps(tmp_path):
    t = KinetoSynth()
    t.range("Step 1", 0, 100, tid=TID)
    t.range("Step 1", 0, 100, tid=TID + 1)
    t.launch(10, 15, 20, 30, tid=TID)
    t.launch(40, 45, 50, 60, tid=TID + 1, stream=9)
    trace = load_trace(t.write(tmp_path / "t.json"))
    assert trace.ops["tid"].nunique() == 2
    assert set(trace.ranges["tid"]) == {(PID << 24) | TID, (PID << 24) | (TID + 1)}
    (a,) = analyze(trace)
    assert list(a.steps["ops"]) == [1, 1]


def _bad_kineto(tmp_path) -> dict:
    files = {}
    files["not-kineto"] = tmp_path / "other.json"
    files["not-kineto"].write_text(json.dumps({"version": 3, "events": []}))
    cpu_only = KinetoSynth()
    cpu_only.range("Step 1", 0, 100)
    cpu_only.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": PID,
                            "tid": TID, "ts": "@0.010@", "dur": "@0.020@"})
    files["no-gpu"] = cpu_only.write(tmp_path / "cpu.json")
    whole = from_synth(causes_trace()).write(tmp_path / "whole.json.gz").read_bytes()
    files["truncated-gzip"] = tmp_path / "truncated.json.gz"
    files["truncated-gzip"].write_bytes(whole[: len(whole) // 2])
    files["truncated-json"] = tmp_path / "truncated.json"
    files["truncated-json"].write_bytes(gzip.decompress(whole)[:300])
    files["bad-event"] = tmp_path / "bad-event.json"
    files["bad-event"].write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon"}]}))
    files["no-steps"] = tmp_path / "no-steps.json"
    files["no-steps"].write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1}]}))
    return files


BAD_KINETO = {
    "not-kineto": "not a torch.profiler trace (no traceEvents list)",
    "no-gpu": "no GPU events (kernel, gpu_memcpy, gpu_memset): profile with "
              "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])",
    "truncated-gzip": "damaged or truncated gzip",
    "truncated-json": "not valid JSON",
    "bad-event": "a malformed trace event",
    # A kernel and nothing else: the fix is torch.profiler's, not nsys'.
    "no-steps": "no step ranges, and no launch call of a GPU op recorded to infer steps from; "
                "record the steps with torch.profiler's prof.step() or record_function('Step N'), "
                "with ProfilerActivity.CPU and CUDA",
}


@pytest.mark.parametrize("kind", sorted(BAD_KINETO))
def test_bad_kineto_input_gives_one_line_and_exit_2(tmp_path, kind):
    path = _bad_kineto(tmp_path)[kind]
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and line.startswith(f"gapscope: error: {path}: ")
    assert BAD_KINETO[kind] in line
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_run_directory_with_a_kineto_trace_resolves_and_is_labelled(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"config": {"variant": "static"}}))
    from_synth(causes_trace()).write(run / "kineto.json.gz")
    result = CliRunner().invoke(main, ["analyze", str(run)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        "run (kineto): device 0, 2 steps, torch.profiler trace schema 1\n")
    # Next to an nsys export, the directory is the export; the Kineto file is named to compare.
    causes_trace().write(run / "capture.sqlite")
    result = CliRunner().invoke(
        main, ["compare", str(run), str(run / "kineto.json.gz"), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "run (kineto)" in result.output and '"run"' in result.output
    assert reader_for(run / "capture.sqlite") is nsys


def test_a_synth_nsys_export_and_random_bytes_still_go_to_the_nsys_reader(tmp_path):
    s = Synth()
    s.range("Step 1", 0, 10)
    assert reader_for(s.write(tmp_path / "a.sqlite")) is nsys
    (tmp_path / "b.txt").write_text("{not json")
    assert reader_for(tmp_path / "b.txt") is nsys
    assert reader_for(tmp_path / "missing.json") is nsys


def test_hta_compare_puts_htas_breakdown_beside_gapscopes_causes(tmp_path):
    pytest.importorskip("hta")
    from scripts import hta_compare
    # The causes drawing in µs (HTA's threshold is in the trace's µs): ops 1-3 µs apart.
    s = causes_trace()
    s.nvtx = [(a * 1000, b * 1000, *r) for a, b, *r in s.nvtx]
    s.calls = [(a * 1000, b * 1000, *r) for a, b, *r in s.calls]
    s.ops = {k: [(a * 1000, b * 1000, *r) for a, b, *r in v] for k, v in s.ops.items()}
    path = from_synth(s).write(tmp_path / "t.json.gz")
    out = tmp_path / "cmp.json"
    assert hta_compare.main([str(path), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    mine = doc["gapscope"]["0"]
    assert mine["idle_ns_by_cause"] == {"sync": 35000, "host": 32000, "queued": 5000,
                                        "unknown": 5000}
    # HTA's rules: sync and host gaps are host_wait (the next launch starts after the drain);
    # the queued and the unknown gap, both under 30 µs, kernel_wait.
    assert mine["hta_rules_ns"] == {"host_wait": 67000, "kernel_wait": 10000, "other": 0}
    # One stream, window = the whole trace: HTA itself (ns kept) gives the same.
    assert doc["hta_exact_us"] == {"7": {"host_wait": 67.0, "kernel_wait": 10.0, "other": 0.0}}


def test_crosscheck_of_a_run_directory_matches_step_by_step(tmp_path, capsys):
    from scripts import kineto_crosscheck as crosscheck
    causes_trace().write(tmp_path / "capture.sqlite")
    twin = from_synth(causes_trace())
    twin.write(tmp_path / "kineto.json.gz")
    assert crosscheck.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["1", "2", "/", "2", "2", "/", "2", "0.0", "0.0", "1.000"]
    assert out[-1] == "match: 2/2 steps with equal ops, 2/2 with busy within 5%"
    # A kernel more in step 2, 6 ns long: the ops differ and busy grows by 20%.
    twin.call("cudaLaunchKernel", 152, 153, corr=50)
    twin.op(50, 154, 160)
    twin.write(tmp_path / "kineto.json.gz")
    assert crosscheck.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[2].endswith("1.200  <-")
    assert out[-1] == "MISMATCH: 1/2 steps with equal ops, 1/2 with busy within 5%"
    assert crosscheck.main([str(tmp_path / "nowhere")]) == 2


@pytest.mark.parametrize("signature, short", [
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps"
     "<float>, unsigned int, long, 4, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<"
     "float>, unsigned int, long, 4, 4>)", "reduce_kernel"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(cutlass_80_"
     "tensorop_s1688gemm_64x64_32x6_nn_align4::Params)", "Kernel2"),
    ("void at::native::(anonymous namespace)::indexSelectSmallIndex<float, long, unsigned int, 2, "
     "2, -2>(at::cuda::detail::TensorInfo<float, unsigned int>, long)", "indexSelectSmallIndex"),
    ("void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out("
     "c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}>(int, long)",
     "elementwise_kernel_with_index"),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
     "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
     "fmha_cutlassF_f32_aligned_64x64_rf_sm80"),
    ("triton_poi_fused_add_0", "triton_poi_fused_add_0"),
    ("nvjet_tst_64x8_64x16_4x1_v_bz_TNN", "nvjet_tst_64x8_64x16_4x1_v_bz_TNN"),
])
def test_a_kernels_short_name_is_nsyss_short_name(signature, short):
    assert kineto.short_kernel_name(signature) == short
