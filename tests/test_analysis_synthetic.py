"""Hand-worked answers on tiny synthetic exports (tests/synth.py draws each one)."""

import sqlite3

import pytest
from synth import PID, TID, Synth, causes_trace

from analysis.errors import TraceError
from analysis.measures.summary import Options, analyze, median, p90
from analysis.readers import load_trace
from analysis.readers.trace import strip_api_suffix


def analyse(tmp_path, synth: Synth, name: str = "t.sqlite", **options):
    return analyze(load_trace(synth.write(tmp_path / name)), Options(**options))


@pytest.fixture
def causes(tmp_path):
    (a,) = analyse(tmp_path, causes_trace())
    return a


def test_each_gap_gets_its_cause_and_ledger(causes):
    gaps = causes.gaps
    assert list(gaps["start_ns"]) == [30, 60, 105, 120, 128]
    assert list(gaps["end_ns"]) == [50, 95, 110, 125, 140]
    assert list(gaps["cause"]) == ["host", "sync", "queued", "unknown", "host"]
    assert list(gaps["idle_blocked_ns"]) == [0, 20, 0, 0, 0]
    assert list(gaps["idle_in_launch_ns"]) == [10, 10, 5, 0, 10]
    assert list(gaps["idle_pre_launch_ns"]) == [10, 5, 0, 5, 2]
    assert list(gaps["next_op"]) == ["k2", "k3", "k4", "k5", "k6"]
    assert list(gaps["step"]) == [1, 2, 2, 2, 2]


def test_summary_adds_up_by_cause_and_ledger(causes):
    s = causes.summary
    assert (s["window_ns"], s["busy_ns"], s["idle_ns"], s["gaps"]) == (130, 53, 77, 5)
    assert s["idle_ns_by_cause"] == {"sync": 35, "host": 32, "queued": 5, "unknown": 5}
    assert s["idle_ledger"] == {"blocked": 20, "pre_launch": 22, "in_launch": 35}
    assert s["sync_idle_share_of_window"] == 35 / 130
    assert s["bubble_ns_median"] == 35 and s["bubble_ns_p90"] == 35
    assert s["check_cover_median"] == 5 / 25
    assert (s["unattributed_ops"], s["ops_without_launch_call"]) == (1, 1)


def test_step_table_matches_the_drawing(causes):
    t = causes.steps
    assert list(t["step"]) == [1, 2]
    assert list(t["cpu_ns"]) == [81, 119]
    assert list(t["ops"]) == [2, 3]
    assert list(t["gpu_start_ns"]) == [20, 95] and list(t["gpu_end_ns"]) == [60, 150]
    assert list(t["busy_ns"]) == [20, 30] and list(t["span_ns"]) == [40, 55]
    assert list(t["intra_idle_ns"]) == [20, 25]
    assert t["bubble_ns"].isna()[0] and t["bubble_ns"][1] == 35
    assert t["overlap_ns"][1] == 0
    assert list(t["period_ns"]) == [40, 90]
    assert t["period_ns"].sum() == causes.summary["window_ns"]
    # Busy time plus the idle parts fill each step's period.
    assert list(t["idle_blocked_ns"]) == [0, 20]
    assert list(t["idle_pre_launch_ns"]) == [10, 12]
    assert list(t["idle_in_launch_ns"]) == [10, 25]


def test_overlapping_steps_have_no_bubble_and_two_streams_overlap(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 50)
    t.range("Step 2", 50, 100)
    t.launch(1, 2, 10, 40, stream=7)
    t.launch(3, 4, 20, 30, stream=9)
    t.launch(51, 52, 35, 60, stream=9)  # starts before step 1's GPU work ends
    t.launch(53, 54, 70, 80, stream=7)
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["busy_ns"]) == [30, 35]
    assert a.steps["bubble_ns"][1] == 0 and a.steps["overlap_ns"][1] == 5
    assert a.steps["period_ns"][1] == 40
    assert (a.summary["window_ns"], a.summary["busy_ns"]) == (70, 60)
    assert list(a.gaps["cause"]) == ["queued"] and list(a.gaps["idle_in_launch_ns"]) == [10]
    assert a.streams.to_dict("list") == {"stream": [7, 9], "ops": [2, 2], "busy_ns": [40, 35]}
    assert a.pairs.to_dict("records") == [{"stream_a": 7, "stream_b": 9, "concurrent_ns": 15}]
    assert a.summary["concurrent_ns"] == 15


def test_three_streams_concurrency_counts_time_with_two_or_more(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(1, 2, 10, 50, stream=1)
    t.launch(3, 4, 20, 60, stream=2)
    t.launch(5, 6, 40, 70, stream=3)
    (a,) = analyse(tmp_path, t)
    # >=2 streams during [20, 60); pairs: 1-2 [20,50), 1-3 [40,50), 2-3 [40,60)
    assert a.summary["concurrent_ns"] == 40
    assert list(a.pairs["concurrent_ns"]) == [30, 10, 20]


def test_projection_needs_the_launch_inside_the_step_on_its_thread(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(10, 20, 30, 40)  # inside: belongs
    t.launch(95, 105, 110, 120)  # straddles the end: nsys does not count it
    t.launch(50, 60, 60, 70, tid=TID + 1)  # same time, other thread
    t.launch(150, 160, 170, 180)  # after the step
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["ops"]) == [1]
    assert a.summary["unattributed_ops"] == 3
    assert a.summary["window_ns"] == 10


def test_cuda_graph_launch_counts_once_like_nsys(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    corr = t.call("cudaGraphLaunch_v10000", 10, 20)
    for start in (30, 40, 50):
        t.op(corr, start, start + 5)
    (a,) = analyse(tmp_path, t)
    assert (a.steps["ops"][0], a.steps["op_records"][0]) == (1, 3)
    assert list(a.gaps["cause"]) == ["queued", "queued"]


def test_correlation_ids_are_matched_within_their_process(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.call("cudaLaunchKernel", 10, 12, corr=1)
    t.op(1, 20, 30)
    t.call("cudaLaunchKernel", 500, 502, pid=PID + 1, tid=7, corr=1)
    t.op(1, 40, 50, pid=PID + 1)  # same correlation id, another process: not this step's
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["ops"]) == [1]
    assert a.summary["unattributed_ops"] == 1


def test_several_devices_are_analysed_apart(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(1, 2, 10, 20, device=0)
    t.launch(3, 4, 30, 40, device=0)
    t.launch(5, 6, 10, 50, device=1)
    path = t.write(tmp_path / "t.sqlite")
    analyses = analyze(load_trace(path))
    assert [a.device for a in analyses] == [0, 1]
    assert [a.summary["idle_ns"] for a in analyses] == [10, 0]
    (only,) = analyze(load_trace(path), Options(device=1))
    assert only.summary["window_ns"] == 40
    with pytest.raises(TraceError,
                       match=r"device 3 \(--device / device=\): the steps ran on devices \[0, 1\]"):
        analyze(load_trace(path), Options(device=3))


def test_open_ranges_are_ignored_and_text_or_text_id_both_name_steps(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 50, registered=False)
    t.range("Step 2", 50, 100, registered=True)
    t.range("Step 3", 100, None)  # still open when the capture stopped
    t.launch(1, 2, 10, 20)
    t.launch(51, 52, 60, 70)
    t.launch(101, 102, 110, 120)
    (a,) = analyse(tmp_path, t)
    assert list(a.steps["step"]) == [1, 2]
    assert list(a.steps["name"]) == ["Step 1", "Step 2"]


def test_start_end_ranges_and_custom_patterns(tmp_path):
    t = Synth()
    t.range("decode 4", 0, 50, event_type=60)
    t.range("decode 5", 50, 100, event_type=60)
    t.launch(1, 2, 10, 20)
    t.launch(51, 52, 60, 70)
    (a,) = analyse(tmp_path, t, step_pattern=r"^decode (\d+)$")
    assert list(a.steps["step"]) == [4, 5] and a.steps["bubble_ns"][1] == 40


def test_version_suffixes_are_stripped_before_matching_blocking_calls(tmp_path):
    assert strip_api_suffix("cudaLaunchKernel_v7000") == "cudaLaunchKernel"
    assert strip_api_suffix("cuMemcpyDtoH_v2") == "cuMemcpyDtoH"
    assert strip_api_suffix("cudaMemcpy_ptds_v7000") == "cudaMemcpy"
    assert strip_api_suffix("cudaMemcpyAsync") == "cudaMemcpyAsync"
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(1, 2, 10, 20)
    t.call("cuMemcpyDtoH_v2", 15, 30)  # entered before the drain at 20: waits 20-30
    t.call("cudaMemcpyAsync_v3020", 36, 38)  # asynchronous: not a wait
    t.launch(40, 41, 50, 60)
    (a,) = analyse(tmp_path, t)
    assert list(a.gaps["idle_blocked_ns"]) == [10] and list(a.gaps["cause"]) == ["sync"]
    assert list(a.gaps["idle_in_launch_ns"]) == [10] and list(a.gaps["idle_pre_launch_ns"]) == [10]


def test_lazy_exports_without_memcpy_or_kernel_tables_load(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(1, 2, 10, 20, kind="memset", api="cudaMemsetAsync_v3020")
    t.launch(3, 4, 30, 40, kind="memset", api="cudaMemsetAsync_v3020")
    (a,) = analyse(tmp_path, t)
    assert a.summary["busy_ns"] == 20 and list(a.gaps["next_op"]) == ["[memset]"]


def test_memcpy_and_kernel_ops_tie_broken_by_lowest_correlation_id(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(1, 2, 10, 20)
    t.launch(5, 6, 30, 35, kind="memcpy", api="cudaMemcpyAsync_v3020", stream=8)
    t.launch(3, 4, 30, 40, name="k")  # launched first, but correlation id 3
    (a,) = analyse(tmp_path, t)
    # The gap [20, 30) ends with two ops starting at 30: corr 2 (memcpy) wins over corr 3.
    assert list(a.gaps["next_op"]) == ["[memcpy]"]
    assert list(a.gaps["idle_in_launch_ns"]) == [10] and list(a.gaps["cause"]) == ["queued"]


def test_medians_of_even_counts_and_p90_interpolate():
    assert median([4, 1, 3, 2]) == 2.5
    assert median([]) is None
    assert p90([10, 20, 30, 40]) == 37.0
    assert p90([5]) == 5.0


def test_bubble_median_of_two_bubbles_is_their_mean(tmp_path):
    t = Synth()
    for i, (s, e) in enumerate([(0, 50), (50, 100), (100, 150)]):
        t.range(f"Step {i}", s, e)
    t.launch(1, 2, 10, 20)
    t.launch(51, 52, 60, 70)  # bubble 40
    t.launch(101, 102, 105, 110)  # bubble 35
    (a,) = analyse(tmp_path, t)
    assert a.summary["bubble_ns_median"] == 37.5
    assert a.summary["bubble_ns_p90"] == 39.5


def test_a_step_pattern_matching_nothing_names_the_pattern(tmp_path):
    with pytest.raises(TraceError, match=r"no NVTX range matches the steps pattern "
                                         r"\(--steps / steps=\) '\^Iter'"):
        analyse(tmp_path, causes_trace(), step_pattern="^Iter")
    with pytest.raises(TraceError, match="not a valid regular expression"):
        analyse(tmp_path, causes_trace(), name="u.sqlite", step_pattern="(")


def test_an_op_whose_id_two_calls_share_is_counted_once(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.call("cudaLaunchKernel_v7000", 10, 20, corr=5)
    t.call("cuLaunchKernel", 12, 18, corr=5)  # the driver call under the runtime one
    t.op(5, 30, 40)
    t.launch(50, 52, 60, 70)
    (a,) = analyse(tmp_path, t)
    assert (a.steps["ops"][0], a.steps["op_records"][0]) == (2, 2)
    assert list(a.gaps["launch_start_ns"]) == [50]


def test_exports_without_global_pid_on_ops_match_by_correlation_id(tmp_path):
    t = causes_trace()
    path = t.write(tmp_path / "t.sqlite")
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN globalPid")
    con.commit()
    con.close()
    (a,) = analyze(load_trace(path))
    assert a.summary["idle_ns_by_cause"] == {"sync": 35, "host": 32, "queued": 5, "unknown": 5}


def test_two_threads_with_the_same_step_numbers_keep_their_own_rows(tmp_path):
    t = Synth()
    t.range("Step 1", 0, 50, tid=TID)
    t.range("Step 1", 100, 150, tid=TID + 1)
    t.launch(1, 2, 10, 20, tid=TID)
    t.launch(30, 31, 40, 45, tid=TID)
    t.launch(101, 102, 110, 120, tid=TID + 1)
    (a,) = analyse(tmp_path, t)
    # Each thread's step 1 is its own first step: no bubble, its period from its own first op.
    assert list(a.steps["step"]) == [1, 1] and a.steps["bubble_ns"].isna().all()
    assert list(a.steps["period_ns"]) == [35, 10] and a.summary["window_ns"] == 110
    # Each gap goes to the step of the thread that launched the op ending it.
    assert list(a.steps["idle_pre_launch_ns"] + a.steps["idle_in_launch_ns"]) == [20, 65]
    assert a.summary["threads"] == 2


def test_a_block_after_the_next_op_was_launched_is_launch_time_not_sync(tmp_path):
    # A graph replay under a deferred check: k2 was launched at 5, long before k1 ends at 20;
    # the host then blocks 8-35 on an event. The gap 20-30 is k2's launch latency.
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(2, 4, 10, 20, name="k1")
    t.launch(5, 7, 30, 40, name="k2")
    t.call("cudaEventSynchronize", 8, 35)
    (a,) = analyse(tmp_path, t)
    assert list(a.gaps["cause"]) == ["queued"]
    assert tuple(a.gaps.loc[0, ["idle_blocked_ns", "idle_in_launch_ns", "idle_pre_launch_ns"]]) \
        == (0, 10, 0)
    assert a.summary["sync_idle_share_of_window"] == 0.0


def test_a_block_entered_after_the_drain_is_host_time_not_sync(tmp_path):
    # The ping-pong's event wait when the host is the slow side: k1 ends at 20, the host enters
    # cudaEventSynchronize at 25 (returns at 27: the event had long completed), launches k2 at
    # 40. Nothing held the GPU back but the host: 20-40 host, 40-50 launch.
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(2, 4, 10, 20, name="k1")
    t.call("cudaEventSynchronize", 25, 27)
    t.launch(40, 42, 50, 60, name="k2")
    (a,) = analyse(tmp_path, t)
    assert list(a.gaps["cause"]) == ["host"]
    assert tuple(a.gaps.loc[0, ["idle_blocked_ns", "idle_pre_launch_ns", "idle_in_launch_ns"]]) \
        == (0, 20, 10)


def test_a_block_entered_exactly_at_the_drain_is_host_time_and_one_just_before_it_waits(
        tmp_path):
    t = Synth()
    t.range("Step 1", 0, 100)
    t.launch(2, 4, 10, 20, name="k1")
    t.call("cudaStreamSynchronize", 20, 24)  # entered as k1 ends: nothing left to wait for
    t.launch(30, 32, 40, 50, name="k2")
    t.call("cudaStreamSynchronize", 49, 56)  # entered 1 ns before k2 ends: waits 50-56
    t.launch(60, 62, 70, 80, name="k3")
    (a,) = analyse(tmp_path, t)
    assert list(a.gaps["cause"]) == ["host", "sync"]
    assert list(a.gaps["idle_blocked_ns"]) == [0, 6]
