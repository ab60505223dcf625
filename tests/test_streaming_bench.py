"""The streaming benchmarks (benchmarks/streaming.py, long_stream.py, continuous.py) end to
end on the CPU at tiny scale: they run, their exactness checks say identical, and the
check itself catches a stream decoded on other frames."""

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import continuous, long_stream, streaming  # noqa: E402
from benchmarks.stream_tools import DEMO_SHARD, TINY, load_shard  # noqa: E402
from cuwfst import DecoderOptions, Graph, StreamingDecoder  # noqa: E402


def _rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_feeder_gives_each_lane_its_utterances_in_order():
    lens = np.array([5, 9, 3], np.int32)
    f = streaming.Feeder(lens, 4, 4, seed=1)
    seen = [[] for _ in range(4)]  # per lane: (utt, start, end) chunks
    for _ in range(30):
        utt, pos, end, fresh, last = f.bounds()
        for l in range(4):
            assert pos[l] < end[l] <= lens[utt[l]] and end[l] - pos[l] <= 4
            assert last[l] == (end[l] == lens[utt[l]])
            if not fresh[l]:  # a stream's chunks follow each other
                assert (utt[l], pos[l]) == (seen[l][-1][0], seen[l][-1][2])
            else:
                assert not seen[l] or seen[l][-1][2] == lens[seen[l][-1][0]]  # the previous one had ended
            seen[l].append((int(utt[l]), int(pos[l]), int(end[l])))
        f.commit(end, last)
    # later streams start at frame 0; the first ones at varied frames
    assert all(s == 0 for lane in seen for (_, s, _), prev in zip(lane[1:], lane) if prev[2] == lens[prev[0]])
    assert len({lane[0][1] for lane in seen}) > 1


def test_streaming_capacity_cpu(tmp_path):
    js, md = tmp_path / "s.jsonl", tmp_path / "s.md"
    rc = streaming.main(["--graph", str(TINY / "HLG.img"), "--log-probs", str(DEMO_SHARD), "--device", "cpu",
                         "--streams", "6", "3", "--ticks", "5", "--warmup-ticks", "1", "--chunk", "32",
                         "--check", "4", "--json", str(js), "--md", str(md)])
    assert rc == 0
    rows = _rows(js)
    assert [(r["engine"], r["n"]) for r in rows] == [("cuwfst", 3), ("cuwfst", 6)]  # smallest N first
    for r in rows:
        assert r["status"] == "ok" and r["ticks"] == 5 and r["warmup_ticks"] == 1
        assert r["check"]["checked"] == min(4, r["n"]) and r["check"]["identical"] == r["check"]["checked"]
        assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert r["decode_s"] > 0 and r["audio_s_per_stream"] == 5 * 32 * 0.04
        assert r["memory"]["stream_winners_max"] > 0
    text = md.read_text()
    assert "| cuwfst | 3 | 1 x 3 | 5 |" in text and "| cuwfst | 6 | 1 x 6 | 5 |" in text


def test_streaming_with_epsilon_graph_and_turnover(tmp_path):
    """TLG (epsilon arcs), long chunks, partial results read every chunk: streams end, are
    finalized and reopened mid-run, and the finalized ones are the ones checked."""
    js = tmp_path / "s.jsonl"
    rc = streaming.main(["--graph", str(TINY / "TLG.img"), "--log-probs", str(DEMO_SHARD), "--device", "cpu",
                         "--streams", "4", "--ticks", "12", "--warmup-ticks", "0", "--chunk", "48",
                         "--check", "4", "--partial", "--json", str(js)])
    (r,) = _rows(js)
    assert rc == 0 and r["status"] == "ok"
    assert r["finalized"] >= 4  # every lane's first utterance (at most 473 frames) ended within 576 frames
    assert r["check"] == dict(r["check"], checked=4, identical=4)
    assert r["knobs"]["partial"] is True


def test_streams_over_several_decoders(tmp_path):
    """5 streams over decoders of at most 2 lanes: 3 decoders advanced in turn; a chunk's
    latency runs to the end of its decoder's advance, so the last group waits longest."""
    js = tmp_path / "s.jsonl"
    rc = streaming.main(["--device", "cpu", "--streams", "5", "--lanes-per-decoder", "2", "--ticks", "4",
                         "--warmup-ticks", "0", "--chunk", "24", "--check", "5", "--json", str(js)])
    (r,) = _rows(js)
    assert rc == 0 and (r["decoders"], r["lanes_per_decoder"]) == (3, 2)
    assert r["check"]["identical"] == r["check"]["checked"] == 5
    # a chunk's latency ends inside its tick's advance (timed from the same start)
    assert r["p50_ms"] <= r["max_ms"] <= r["advance_max_ms"]


def test_lanes_that_do_not_fit_are_reported(tmp_path, monkeypatch):
    import cuwfst

    real = cuwfst.StreamingDecoder

    def small_memory(graph, options=None, device="cpu", *, max_streams=1024, **kw):
        if max_streams > 4:
            raise MemoryError(f"cannot allocate 9.9 GiB for frontier states of {max_streams} lanes")
        return real(graph, options, device, max_streams=max_streams, **kw)

    monkeypatch.setattr(cuwfst, "StreamingDecoder", small_memory)
    js, md = tmp_path / "s.jsonl", tmp_path / "s.md"
    rc = streaming.main(["--device", "cpu", "--streams", "3", "6", "--ticks", "2", "--json", str(js), "--md", str(md)])
    rows = _rows(js)
    assert rc == 0 and [r["status"] for r in rows] == ["ok", "does not fit"]
    assert "cannot allocate 9.9 GiB" in rows[1]["reason"]
    assert "| cuwfst | 6 |" in md.read_text() and "does not fit: cannot allocate" in md.read_text()


def test_riva_rows_skip_cleanly(tmp_path):
    js = tmp_path / "s.jsonl"
    rc = streaming.main(["--device", "cpu", "--streams", "2", "5", "--riva-only",
                         "--riva-graph", str(tmp_path / "no-such-TLG.fst"), "--json", str(js)])
    rows = _rows(js)
    assert rc == 0 and [r["n"] for r in rows] == [2, 5]
    assert all(r["engine"] == "riva" and r["status"] == "skipped" and r["reason"] for r in rows)


def test_check_catches_a_stream_fed_other_frames():
    graph = Graph.load(TINY / "HLG.img")
    opts = DecoderOptions()
    lp, _ = load_shard(DEMO_SHARD)
    sd = StreamingDecoder(graph, opts, device="cpu", max_streams=2)
    s = sd.open_stream()
    for t in range(0, 100, 16):
        sd.advance([s], [lp[0, t : min(t + 16, 100)]])
    h = sd.finalize(s)
    # lane 7 claims frames 10..100 of utterance 0, but its stream was fed frames 0..100
    res = streaming.check_samples(graph, opts, lp, {3: (0, 0, 100, h), 7: (0, 10, 100, h)}, [3, 7])
    assert (res["checked"], res["identical"]) == (2, 1)
    assert [m["lane"] for m in res["mismatches"]] == [7]


def test_long_stream_cpu(tmp_path):
    out = tmp_path / "ls"
    rc = long_stream.main(["--graph", str(TINY / "HLG.img"), "--log-probs", str(DEMO_SHARD), "--device", "cpu",
                           "--frames", "1500", "--chunk", "7", "--csv", f"{out}.csv", "--json", f"{out}.jsonl",
                           "--md", f"{out}.md"])
    assert rc == 0
    (r,) = _rows(f"{out}.jsonl")  # the GPU-part line was replaced by the checked one
    assert r["frames_fed"] == 1500 and r["chunks"] == -(-1500 // 7) and r["stopped"] is None
    assert r["identical"] is True and r["cpu_words"] == r["words"] > 0
    with open(f"{out}.csv") as f:
        samples = list(csv.DictReader(f))
    assert len(samples) == r["chunks"] and int(samples[-1]["frames"]) == 1500
    assert int(samples[0]["stream_winners"]) > 0
    assert "identical to the CPU" in Path(f"{out}.md").read_text()


def test_long_stream_stops_at_its_time_cap(tmp_path):
    js = tmp_path / "ls.jsonl"
    rc = long_stream.main(["--device", "cpu", "--frames", "5000", "--chunk", "16", "--max-seconds", "1e-9",
                           "--json", str(js)])
    (r,) = _rows(js)
    assert rc == 0 and r["frames_fed"] == 16 and "max-seconds" in r["stopped"] and r["identical"] is True


def test_long_stream_result_checked_elsewhere(tmp_path, capsys):
    """--result-out on the streaming machine, --check-result on another: the same frames
    (hash-checked) through the CPU decoder, bit for bit; a changed score, another shard or
    another graph is caught."""
    res = tmp_path / "r.json"
    graph = str(TINY / "HLG.img")
    rc = long_stream.main(["--graph", graph, "--log-probs", str(DEMO_SHARD), "--device", "cpu", "--frames", "900",
                           "--chunk", "16", "--no-check", "--result-out", str(res)])
    assert rc == 0
    rec = json.loads(res.read_text())
    assert rec["frames"] == 900 and len(rec["words"]) > 0 and rec["overflow"] == 0
    check = ["--check-result", str(res), "--graph", graph, "--log-probs", str(DEMO_SHARD)]
    assert long_stream.main(check) == 0
    assert "identical: True" in capsys.readouterr().out
    bad = dict(rec, score_bits=rec["score_bits"] ^ 1)  # one bit of the float32 score
    res.write_text(json.dumps(bad))
    assert long_stream.main(check) == 1
    res.write_text(json.dumps(dict(rec, frames_sha256="0" * 64)))
    with pytest.raises(SystemExit, match="not those of"):
        long_stream.main(check)
    res.write_text(json.dumps(dict(rec, graph_sha256="0" * 64)))
    with pytest.raises(SystemExit, match="not the graph"):
        long_stream.main(check)


def test_tile_frames_cycles_the_utterances():
    lp = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    out = long_stream.tile_frames(lp, np.array([2, 3]), 9)
    want = np.concatenate([lp[0, :2], lp[1, :3], lp[0, :2], lp[1, :2]])
    assert np.array_equal(out, want)


def test_continuous_modes_cpu(tmp_path):
    js, md = tmp_path / "c.jsonl", tmp_path / "c.md"
    rc = continuous.main(["--graph", str(TINY / "HLG.img"), "--log-probs", str(DEMO_SHARD), "--device", "cpu",
                          "--utts", "5", "--lanes", "2", "--reps", "1", "--threads", "2", "--baseline", "stored",
                          "--modes", "padded", "continuous", "decode_all", "refill", "decode_all_refill", "--check", "3",
                          "--json", str(js), "--md", str(md)])
    assert rc == 0
    rows = _rows(js)
    assert [r["batching"] for r in rows] == ["stored", "padded", "continuous", "decode_all", "refill",
                                             "decode_all_refill"]
    for r in rows:
        assert r["rows"] == 5 and r["identical_to_first"] == 5 and r["cpu_identical"] == 3
        assert r["vs_stored"] == round(r["rtfx"] / rows[0]["rtfx"], 3)
    assert "| 2 | decode_all |" in md.read_text()


def test_rows_carry_per_tick_times(tmp_path):
    js = tmp_path / "s.jsonl"
    rc = streaming.main(["--device", "cpu", "--streams", "4", "--ticks", "6", "--warmup-ticks", "1", "--chunk", "16",
                         "--json", str(js)])
    (r,) = _rows(js)
    assert rc == 0 and "config" not in r and "log_events" not in r  # the CPU has no winners-log counters
    pt = r["per_tick"]
    assert len(pt["advance_ms"]) == len(pt["turnover_ms"]) == r["ticks"] == 6
    assert max(pt["advance_ms"]) == r["advance_max_ms"]


def test_configs_parse_into_decoder_keywords_and_environment():
    assert streaming.parse_config("default") == {}
    c = streaming.parse_config("memory=eager,kernels=old,arena-ahead=off")
    assert c == {"memory": "eager", "kernels": "old", "arena_ahead": "off"}
    kw, env = streaming.config_kwargs(c)
    assert kw == dict(memory="eager", scan_split=1, closure="scan", finalize_split=8, fused_max=False,
                      trim_arcs=False)
    assert env == {"CUWFST_ARENA_AHEAD": "off"}
    assert streaming.config_name(c) == "memory=eager,kernels=old,arena_ahead=off"
    for bad in ("memory=huge", "kernels=fast", "ahead=on", "memory"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            streaming.parse_config(bad)
    a = streaming.parse_args(["--configs", "default", "arena_ahead=off", "memory=eager", "--kernels", "old"])
    assert a.config_list == [{"kernels": "old"}, {"kernels": "old", "arena_ahead": "off"},
                             {"kernels": "old", "memory": "eager"}]
    with pytest.raises(SystemExit):
        streaming.parse_args(["--configs", "memory=sometimes"])
    with pytest.raises(SystemExit, match="GPU knobs"):
        streaming.main(["--device", "cpu", "--streams", "2", "--ticks", "1", "--memory", "eager"])
    import os
    with streaming._environ({"CUWFST_ARENA_AHEAD": "off"}):
        assert os.environ["CUWFST_ARENA_AHEAD"] == "off"
    assert "CUWFST_ARENA_AHEAD" not in os.environ or os.environ["CUWFST_ARENA_AHEAD"] != "off"


def test_winners_log_events_are_counted_per_tick():
    """A GPU engine's counters (here a fake's) are read around each tick: the advance's and
    the turnover's changes per measured tick, and their totals."""
    import argparse

    class Fake:
        def __init__(self):
            self.c = dict.fromkeys(streaming.COUNTERS, 0)
            self.k = 0

        def describe(self):
            return {"decoders": 1}

        def counters(self):
            return dict(self.c)

        def step(self, chunks, fresh, last):
            self.k += 1
            self.c["advance_rounds"] += 2 if self.k == 3 else 1  # the guard paused tick 3's steps once
            self.c["gc_rounds"] += 2 if self.k == 3 else 1
            self.c["gc_us"] += 1500
            if self.k in (2, 4):  # growths before the launch (tick 2) and ahead of need (tick 4)
                self.c["arena_grows"] += 1
                self.c["arena_grow_us" if self.k == 2 else "arena_ahead_us"] += 40000
                self.c["arena_ahead_grows"] += self.k == 4
                self.c["arena_capacity"] += 1 << 20
            return [(len(chunks), 0.001)], {}

        def turnover(self, lanes, reopen=True):
            if self.k == 5:
                self.c["arena_grows"] += 1
                self.c["arena_grow_us"] += 2000
            return {}

    lens = np.array([400, 400], np.int32)
    a = argparse.Namespace(chunk=4, frame_shift=0.04, warmup_ticks=1, ticks=5, pace=False)
    row, _ = streaming.run_one(Fake(), 2, streaming.Feeder(lens, 2, 4, 0), lambda u, s, e: None, a,
                               0.0, 1e9, set(), lambda: None)
    pt = row["per_tick"]  # measured ticks are 2..6
    assert pt["grows"] == [1, 0, 1, 0, 0] and pt["ahead_grows"] == [0, 0, 1, 0, 0]
    assert pt["grow_ms"] == [40.0, 0, 0, 0, 0] and pt["ahead_ms"] == [0, 0, 40.0, 0, 0]
    assert pt["rounds"] == [1, 2, 1, 1, 1] and pt["gc_ms"] == [1.5] * 5
    assert pt["turnover_grows"] == [0, 0, 0, 1, 0] and pt["turnover_grow_ms"] == [0, 0, 0, 2.0, 0]
    assert pt["capacity_mi"] == [1, 1, 2, 2, 2]
    assert row["log_events"] == dict(grows=3, ticks_with_grows=3, grow_ms=42.0, ahead_grows=1, ahead_ms=40.0,
                                     extra_rounds=1, gc_rounds=6, gc_ms=7.5, captures=0)


@pytest.mark.gpu
def test_streaming_configs_on_the_gpu(tmp_path):
    """The same-run A/B of the GPU rows: one row per configuration, each with what ran
    (effective), its per-tick advance times and winners-log counters, and exact results."""
    js = tmp_path / "s.jsonl"
    rc = streaming.main(["--graph", str(TINY / "HLG.img"), "--log-probs", str(DEMO_SHARD), "--device", "cuda",
                         "--streams", "8", "--ticks", "6", "--warmup-ticks", "1", "--chunk", "16", "--check", "8",
                         "--arena-entries", "4096", "--json", str(js),
                         "--configs", "default", "arena_ahead=off", "memory=eager", "kernels=old"])
    rows = _rows(js)
    assert rc == 0 and [r["config"] for r in rows] == ["default", "arena_ahead=off", "memory=eager", "kernels=old"]
    for r in rows:
        assert r["status"] == "ok" and r["check"]["identical"] == r["check"]["checked"] == 8, r
        pt, ev = r["per_tick"], r["log_events"]
        assert len(pt["advance_ms"]) == len(pt["grows"]) == len(pt["rounds"]) == len(pt["capacity_mi"]) == 6
        assert sum(pt["grows"]) + sum(pt["turnover_grows"]) == ev["grows"] and ev["gc_rounds"] >= 6
        assert min(pt["rounds"]) >= 1 and ev["extra_rounds"] == sum(pt["rounds"]) - 6
    eff = {r["config"]: r["effective"] for r in rows}
    assert eff["default"]["memory"] == "lazy" and eff["memory=eager"]["memory"] == "eager"
    assert (eff["kernels=old"]["scan_split"], eff["kernels=old"]["finalize_split"]) == (1, 8)
    assert rows[1]["log_events"]["ahead_grows"] == rows[2]["log_events"]["ahead_grows"] == 0


def test_continuous_phases_time_the_host_calls_and_undo_the_wrappers(tmp_path):
    import cuwfst.decoder.gpu as gpu_mod
    import cuwfst.decoder.offline as offline_mod

    before = (offline_mod.prepare_offline, gpu_mod.GpuBackend.__dict__["_collect"], gpu_mod.GpuInstance.decode_many)
    js, md = tmp_path / "c.jsonl", tmp_path / "c.md"
    rc = continuous.main(["--graph", str(TINY / "HLG.img"), "--log-probs", str(DEMO_SHARD), "--device", "cpu",
                          "--utts", "4", "--lanes", "2", "--reps", "2", "--threads", "2", "--baseline", "stored",
                          "--modes", "decode_all", "--check", "0", "--phases", "--json", str(js), "--md", str(md)])
    assert rc == 0
    stored, dall = _rows(js)
    # the CPU decoder prepares every call's rows (prepare_offline); only decode_all packs them
    assert stored["phase_ms"]["prepare_offline"] > 0 and "pad_on_device" not in stored["phase_ms"]
    assert dall["phase_ms"]["prepare_offline"] > 0
    assert "GpuInstance.decode_many" not in dall["phase_ms"]  # no GPU: never called
    assert "ms a pass: prepare_offline" in md.read_text()
    after = (offline_mod.prepare_offline, gpu_mod.GpuBackend.__dict__["_collect"], gpu_mod.GpuInstance.decode_many)
    assert after == before
