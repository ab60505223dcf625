"""The synthetic-speech model pipeline (benchmarks/model): numpy parts always; espeak-ng,
torch and the end-to-end run only where those are installed (CI has neither by default).

The end-to-end test runs `python -m benchmarks.model.train --scale tiny` on a copy of the
shipped tiny tier: 16 training utterances, a 60k-parameter model, 3 steps. It proves the
plumbing and the shard format, not the model's quality (that is the GPU run's job).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.model import audio  # noqa: E402
from benchmarks.model.calibrate import estimates, fit, posterior_stats, sim_rows  # noqa: E402
from benchmarks.model.sentences import (WORDS_PER_SECOND, SentenceSource, held_out_sentence,  # noqa: E402
                                        set_target_words)
from benchmarks.model.shards import pack, write_set  # noqa: E402

TINY = ROOT / "cuwfst" / "data" / "tiny"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _espeak() -> bool:
    from benchmarks.model.espeak import available

    return available()


needs_espeak = pytest.mark.skipif(not _espeak(), reason="no espeak-ng (pip install espeakng-loader)")
needs_torch = pytest.mark.skipif(not _has("torch"), reason="no torch")
needs_fbank = pytest.mark.skipif(not (_has("kaldi_native_fbank") or _has("torchaudio")),
                                 reason="no kaldi-native-fbank or torchaudio")


# ---------------------------------------------------------------------------- audio (numpy)
def _tone(freq, rate, seconds=0.5):
    t = np.arange(int(rate * seconds)) / rate
    return np.sin(2 * np.pi * freq * t).astype(np.float32)


def _peak_hz(x, rate):
    spec = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return np.fft.rfftfreq(x.size, 1 / rate)[spec.argmax()]


def test_resample_keeps_pitch_and_level_and_speed_changes_both():
    x = _tone(1000.0, 22050)
    y = audio.resample(x, 22050, 16000)
    assert y.shape[0] == round(x.shape[0] * 16000 / 22050)
    assert abs(_peak_hz(y, 16000) - 1000.0) < 5.0
    mid = slice(1000, -1000)  # away from the FFT's wrap-around at the ends
    assert abs(np.sqrt(np.mean(y[mid] ** 2)) - np.sqrt(0.5)) < 0.01
    # speed perturbation 1.1: 10% shorter and 10% higher
    z = audio.resample(x, 22050 * 1.1, 16000)
    assert z.shape[0] == round(x.shape[0] * 16000 / (22050 * 1.1))
    assert abs(_peak_hz(z, 16000) - 1100.0) < 6.0


def test_resample_removes_what_the_new_rate_cannot_hold():
    x = _tone(10000.0, 22050)  # above 8 kHz: must vanish at 16 kHz, not fold down to 6 kHz
    y = audio.resample(x, 22050, 16000)
    assert np.sqrt(np.mean(y[1000:-1000] ** 2)) < 1e-3


def test_colored_noise_is_unit_power_reproducible_and_sloped():
    a = audio.colored_noise(np.random.default_rng(3), 48000)
    b = audio.colored_noise(np.random.default_rng(3), 48000)
    assert np.array_equal(a, b) and a.dtype == np.float32
    assert abs(np.mean(a * a) - 1.0) < 1e-3
    # over many draws the slope is random in [0, 2]: low bands carry at least as much power as high ones
    lows, highs = [], []
    for s in range(20):
        p = np.abs(np.fft.rfft(audio.colored_noise(np.random.default_rng(s), 16000))) ** 2
        f = np.fft.rfftfreq(16000, 1 / 16000)
        lows.append(p[(f > 100) & (f < 400)].mean())
        highs.append(p[(f > 4000) & (f < 7000)].mean())
    ratio = np.array(lows) / np.array(highs)
    assert (ratio > 0.5).all() and ratio.max() > 20  # some near white, some strongly brown


def test_augment_sets_the_signal_to_noise_ratio():
    x = (_tone(440.0, 22050, 1.0) * 16000).astype(np.int16)
    aug = audio.Augment(speeds=(1.0,), snr_db=(20.0, 20.0), gain_db=(0.0, 0.0))
    y, speed = audio.augment(x, 22050, np.random.default_rng(0), aug)
    clean = audio.resample(x.astype(np.float32) / 32768.0, 22050, 16000)
    noise = y - clean
    snr = 10 * np.log10(np.mean(clean**2) / np.mean(noise**2))
    assert speed == 1.0 and abs(snr - 20.0) < 0.2
    y2, _ = audio.augment(x, 22050, np.random.default_rng(0), aug)
    assert np.array_equal(y, y2)
    loud = audio.augment(x * 0 + 32767, 22050, np.random.default_rng(1), audio.Augment(speeds=(1.0,), snr_db=None,
                                                                                      gain_db=(0.0, 0.0)))[0]
    assert np.abs(loud).max() <= 0.99 + 1e-6  # never clipped


def test_voice_pools_are_disjoint_and_held_out_voices_stay_held_out():
    assert not set(audio.TRAIN_VARIANTS) & set(audio.TEST_VARIANTS)
    rng = np.random.default_rng(0)
    train = [audio.pick_voice(rng, held_out=False) for _ in range(300)]
    test = [audio.pick_voice(rng, held_out=True) for _ in range(300)]
    variant = lambda v: v.name.split("+", 1)[1] if "+" in v.name else ""  # noqa: E731
    assert {variant(v) for v in train} <= set(audio.TRAIN_VARIANTS)
    assert {variant(v) for v in test} <= set(audio.TEST_VARIANTS)
    assert len({v.name.split("+")[0] for v in test}) == len(audio.ACCENTS)  # every accent in both
    assert all(130 <= v.rate <= 230 and 20 <= v.pitch <= 80 for v in train + test)
    again = np.random.default_rng(0)
    assert audio.pick_voice(again, held_out=False) == train[0]


def test_wav_round_trip(tmp_path):
    x = _tone(300.0, 16000) * 0.5
    audio.write_wav(tmp_path / "a.wav", x)
    y, rate = audio.read_wav(tmp_path / "a.wav")
    assert rate == 16000 and y.shape == x.shape and np.abs(y - x).max() < 1e-4


# ---------------------------------------------------------------------------- sentences
@pytest.fixture(scope="module")
def source():
    return SentenceSource(TINY, seed=5)


def test_sentences_are_reproducible_row_by_row(source):
    rows = source.batch("train", 0, 12)
    assert [source.utterance("train", i) for i in (7, 3, 11)] == [rows[7], rows[3], rows[11]]
    again = SentenceSource(TINY, seed=5)
    assert again.batch("train", 0, 12) == rows
    other = SentenceSource(TINY, seed=6).batch("train", 0, 12)
    assert other != rows
    words = {ln.split()[0] for ln in (TINY / "words.txt").read_text().splitlines()}
    for u in rows:
        assert 4 <= len(u.words) and set(u.words) <= words
        assert u.text.endswith(".") and u.text.count(".") >= len(u.sentences)


def test_held_out_rows_hold_no_training_sentence(source):
    train = source.batch("train", 0, 60)
    test = source.batch("test", 0, 20)
    sets = source.batch("set", 0, 5)
    train_s = {s for u in train for s in u.sentences}
    held_s = {s for u in test + sets for s in u.sentences}
    assert not train_s & held_s
    assert not any(held_out_sentence(s) for s in train_s) and all(held_out_sentence(s) for s in held_s)
    # set rows are sized like the simulator's utterances: 100-600 frames of 40 ms at the speech rate
    for u in sets:
        want = set_target_words(5, u.index)
        assert 100 * 0.04 * WORDS_PER_SECOND - 1 <= want <= 600 * 0.04 * WORDS_PER_SECOND + 1
        assert len(u.words) >= want
    assert len({set_target_words(5, i) for i in range(20)}) > 5


def test_the_sentence_hash_is_stable():
    # CRC-32 of the text: the same split in every process and on every machine
    assert held_out_sentence(("it", "is", "a", "good", "day")) == (zlib.crc32(b"it is a good day") % 10 == 0)
    ones = sum(held_out_sentence((f"w{i}",)) for i in range(5000))
    assert 350 < ones < 650  # about one in ten


# ---------------------------------------------------------------------------- shards
def _rows(rng, n, V=501):
    out = []
    for _ in range(n):
        z = rng.normal(size=(int(rng.integers(5, 30)), V)).astype(np.float32)
        out.append(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
    return out


def test_model_set_shards_load_in_the_peers_harness(tmp_path):
    from benchmarks.peers.corpus import find_shards, load_corpus

    corpus = tmp_path / "tier"
    shutil.copytree(TINY, corpus)
    wid = {w: int(i) for w, i in (ln.split() for ln in (corpus / "words.txt").read_text().splitlines())}
    vocab = [w for w in wid if w[0].isalpha()]
    rng = np.random.default_rng(0)
    lps = _rows(rng, 5)
    refs = [[vocab[int(j)] for j in rng.integers(0, len(vocab), int(rng.integers(1, 6)))] for _ in range(5)]
    paths = write_set(corpus / "model", lps, refs, wid, seed=9, indices=[3, 4, 8, 9, 12], shard_size=2)
    assert [Path(p).name for p in paths] == ["shard-00000.npz", "shard-00001.npz", "shard-00002.npz"]
    with np.load(paths[0]) as z:
        assert set(z.files) == {"log_probs", "log_probs_fp16", "lengths", "ref_word_ids", "ref_num_words",
                                "ref_text", "utt_seed"}
        assert z["utt_seed"].tolist() == [[9, 3], [9, 4]]
        T = z["log_probs"].shape[1]
        short = int(z["lengths"].min())
        if short < T:  # padding is a certain blank, as the simulator writes it
            row = int(z["lengths"].argmin())
            assert z["log_probs"][row, short, 0] == 0.0 and z["log_probs"][row, short, 1:].max() == -30.0
    c = load_corpus(str(corpus), set_name="model")
    assert c.num_utts == 5 and c.refs == [[wid[w] for w in r] for r in refs]
    for i in range(5):
        np.testing.assert_array_equal(c.log_probs[i, : c.lengths[i]], lps[i])
    # a second set beside it: loading without --set would mix them, so it is refused
    write_set(corpus / "sim", lps[:2], refs[:2], wid, seed=0, indices=[0, 1])
    with pytest.raises(ValueError, match="--set"):
        find_shards(str(corpus))
    assert len(find_shards(str(corpus), "sim")) == 1
    with pytest.raises(FileNotFoundError):
        find_shards(str(corpus), "nothing")
    # rewriting a set with fewer rows leaves no stale shard behind
    write_set(corpus / "model", lps[:1], refs[:1], wid, seed=9, indices=[3], shard_size=2)
    assert len(find_shards(str(corpus), "model")) == 1


def test_pack_refuses_words_missing_from_the_tier(tmp_path):
    with pytest.raises(KeyError, match="not in words.txt"):
        pack(_rows(np.random.default_rng(0), 1), [["zebra"]], {"cat": 1}, 0, [0])
    with pytest.raises(KeyError, match="zebra"):
        write_set(tmp_path / "model", _rows(np.random.default_rng(0), 2), [["cat"], ["zebra"]], {"cat": 1}, 0, [0, 1])
    assert not (tmp_path / "model").exists()  # nothing half-written


# ---------------------------------------------------------------------------- calibration
def test_posterior_stats_on_a_hand_made_matrix():
    # 6 frames: blank, tok 5 x2, blank, tok 7, tok 9 (a run of 2 and two runs of 1)
    labels = [0, 5, 5, 0, 7, 9]
    z = np.full((6, 501), -20.0, np.float32)
    z[np.arange(6), labels] = 0.0
    lp = z - np.logaddexp.reduce(z, axis=1, keepdims=True)
    s = posterior_stats([lp])
    assert s["frames"] == 6 and abs(s["blank_fraction"] - 2 / 6) < 1e-9
    assert s["run_p"] == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert s["token"]["gap"]["p50"] == pytest.approx(20.0, abs=1e-3)
    assert s["token"]["within"]["10"] == 0.0 and s["token"]["within"]["20"] == 0.0
    assert s["blank"]["off"]["p50"] == pytest.approx(-20.0 - np.log1p(500 * np.exp(-20.0)), abs=1e-3)


@pytest.fixture(scope="module")
def tiny_sim():
    from benchmarks.corpus.simulate import Simulator

    return Simulator(TINY)


def test_fit_recovers_known_simulator_settings(tiny_sim):
    from benchmarks.corpus.simulate import SimConfig

    truth = replace(SimConfig(), peak=17.0, blank_peak=21.0, noise_sd=2.2, blank_ratio=0.6,
                    piece_frames_p=(0.8, 0.15, 0.05), margin_mean=6.0, margin_sd=2.0)
    tiny_sim.config = truth
    target = posterior_stats(sim_rows(tiny_sim, 40, 1)[0])

    def simulate_stats(cfg):
        tiny_sim.config = cfg
        return posterior_stats(sim_rows(tiny_sim, 40, 2)[0])

    try:
        cfg, history = fit(target, simulate_stats, iterations=2)
    finally:
        tiny_sim.config = SimConfig()
    assert cfg.peak == pytest.approx(17.0, abs=0.6) and cfg.blank_peak == pytest.approx(21.0, abs=0.6)
    assert cfg.noise_sd == pytest.approx(2.2, abs=0.15)
    assert cfg.blank_ratio == pytest.approx(0.6, abs=0.03)
    assert cfg.piece_frames_p[0] == pytest.approx(0.8, abs=0.05)
    assert cfg.margin_mean == pytest.approx(6.0, abs=0.7)
    assert len(history) == 3 and min(h["distance"] for h in history) < 0.05
    # the defaults are far from that target: the fit moved
    assert estimates(target)["noise_sd"] > 1.4


def test_simulator_profiles(tmp_path, tiny_sim):
    from benchmarks.corpus.simulate import SimConfig, load_profile

    assert load_profile(None) == SimConfig() == load_profile("default")
    model = load_profile("model")
    assert model != SimConfig() and model.blank_peak is not None
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"config": {"peak": 15.0, "piece_frames_p": [0.9, 0.1]}}))
    cfg = load_profile(p)
    assert cfg.peak == 15.0 and cfg.piece_frames_p == (0.9, 0.1)
    p.write_text(json.dumps({"config": {"peek": 15.0}}))
    with pytest.raises(ValueError, match="peek"):
        load_profile(p)
    with pytest.raises(FileNotFoundError):
        load_profile("no-such-profile")
    # the new knobs change nothing at their defaults: the fixture's rows come out bit for bit
    d = np.load(ROOT / "tests" / "data" / "sim_tiny.npz")
    b = tiny_sim.batch(2, 0)
    np.testing.assert_array_equal(b["log_probs"].astype(np.float16), d["log_probs_fp16"][:2, : b["log_probs"].shape[1]])
    # and a profile's noise scale and blank peak are what its rows show
    tiny_sim.config = replace(SimConfig(), noise_sd=3.0, blank_peak=25.0)
    try:
        lp = tiny_sim.utterance(0, 0)["log_probs"]
    finally:
        tiny_sim.config = SimConfig()
    blank_rows = lp[lp.argmax(1) == 0]
    assert np.median(blank_rows[:, 0] - np.median(blank_rows[:, 1:], axis=1)) == pytest.approx(25.0, abs=1.0)
    # within a frame the label's own noise is one shared offset: the spread is noise_sd itself
    assert np.median(np.std(blank_rows[:, 1:], axis=1)) == pytest.approx(3.0, abs=0.2)


# ---------------------------------------------------------------------------- the example's word times
def test_word_times_from_the_best_path():
    sys.path.insert(0, str(ROOT / "examples"))
    from audio_to_words import word_times

    pieces = ["<blk>", "▁the", "▁c", "at", "▁a"]
    #        frame: 0  1  2  3  4  5  6  7  8
    tokens = [0, 1, 1, 0, 2, 3, 0, 0, 4]
    assert word_times(tokens, 3, pieces, 0.04) == [(0.04, 0.12), (0.16, 0.24), (0.32, 0.36)]
    assert word_times(tokens, 2, pieces, 0.04) is None  # a count that does not match: caller falls back
    # a repeated word start split by a blank is two words
    assert word_times([1, 0, 1], 2, pieces, 0.04) == [(0.0, 0.04), (0.08, 0.12)]


# ---------------------------------------------------------------------------- espeak-ng
@needs_espeak
def test_espeak_speaks_and_refuses_unknown_voices():
    from benchmarks.model.espeak import Espeak, Voice

    e = Espeak.get()
    short = e.synth("yes", Voice("en-us"))
    long = e.synth("yes it is a very long sentence with many words in it", Voice("en-us"))
    assert e.sample_rate == 22050 and short.dtype == np.int16
    assert 0 < short.size < long.size and np.abs(long).max() > 1000
    slow = e.synth("yes it is a very long sentence with many words in it", Voice("en-us", rate=100))
    assert slow.size > 1.4 * long.size
    with pytest.raises(ValueError):
        e.synth("x", Voice("no-such-voice"))


@needs_espeak
@needs_fbank
def test_synthesis_is_reproducible_whatever_the_workers(source, monkeypatch):
    from benchmarks.model import synth

    monkeypatch.setattr(synth, "CHUNK", 2)  # 6 rows: 3 chunks, each in a fresh process
    aug = audio.TRAIN_AUGMENT
    a = synth.synthesize(TINY, "train", range(6), 5, held_out_voices=False, aug=aug, workers=2)
    b = synth.synthesize(TINY, "train", [5, 3, 1, 0, 2, 4], 5, held_out_voices=False, aug=aug, workers=1)
    assert [r.index for r in a] == [r.index for r in b] == list(range(6))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.feats, y.feats)
        assert x.voice == y.voice and x.speed == y.speed
    for r in a:
        assert r.feats.shape[1] == 80 and r.feats.dtype == np.float16
        assert abs(r.feats.shape[0] - r.num_samples / 160) <= 1  # 10 ms frames, snip_edges off
        assert r.words == source.utterance("train", r.index).words
        assert r.speed in aug.speeds
    # a subset keeps each row's chunk: rows 4 and 5 (chunk 2) come out the same alone
    c = synth.synthesize(TINY, "train", [4, 5], 5, held_out_voices=False, aug=aug, workers=1)
    for x, y in zip(a[4:], c):
        np.testing.assert_array_equal(x.feats, y.feats)
    held = synth.synthesize(TINY, "test", range(2), 5, held_out_voices=True, aug=audio.TEST_AUGMENT, workers=1)
    assert all(r.voice["name"].split("+")[-1] in audio.TEST_VARIANTS for r in held)
    # a deadline already past: the first chunk's rows only
    early = synth.synthesize(TINY, "train", range(6), 5, held_out_voices=False, aug=aug, workers=1, deadline=0.0)
    assert [r.index for r in early] == [0, 1]


@needs_espeak
@needs_fbank
def test_a_dead_synthesis_worker_costs_its_chunk_not_the_run(monkeypatch):
    from benchmarks.model import synth

    monkeypatch.setattr(synth, "CHUNK", 2)
    monkeypatch.setenv("CUWFST_SYNTH_CRASH_ROW", "3")  # chunk 1 (rows 2, 3) dies
    said = []
    rows = synth.synthesize(TINY, "train", range(6), 5, held_out_voices=False, aug=audio.TRAIN_AUGMENT,
                            workers=2, log=said.append)
    assert [r.index for r in rows] == [0, 1, 4, 5]
    assert any("chunk 1 lost" in m for m in said), said


# ---------------------------------------------------------------------------- torch
@needs_torch
def test_model_output_does_not_depend_on_its_batch():
    import torch

    from benchmarks.model.net import PRESETS, ConformerCTC, subsampled_lengths

    torch.manual_seed(0)
    m = ConformerCTC(PRESETS["tiny"]).eval()
    m.feat_mean += 2.0  # padding must not leak through the normalization either
    x = torch.randn(3, 50, 80)
    lens = torch.tensor([50, 21, 6])
    lp, ol = m(x, lens)
    assert ol.tolist() == subsampled_lengths(np.array([50, 21, 6])).tolist() == [13, 6, 2]
    assert torch.allclose(lp.exp().sum(-1), torch.ones(3, 13), atol=1e-5)
    for i in range(3):
        alone, _ = m(x[i : i + 1, : lens[i]], lens[i : i + 1])
        assert torch.allclose(alone[0], lp[i, : ol[i]], atol=1e-5)


@needs_torch
def test_checkpoint_round_trip(tmp_path):
    import torch

    from benchmarks.model.net import PRESETS, ConformerCTC, load_npz, save_npz

    torch.manual_seed(1)
    m = ConformerCTC(PRESETS["tiny"]).eval()
    m.feat_mean += 1.5
    x, lens = torch.randn(2, 40, 80), torch.tensor([40, 33])
    ref, _ = m(x, lens)
    save_npz(m, tmp_path / "f.npz", meta={"seed": 3})
    save_npz(m, tmp_path / "q.npz", int8=True)
    f, meta = load_npz(tmp_path / "f.npz")
    q, _ = load_npz(tmp_path / "q.npz")
    assert meta == {"seed": 3} and f.config == m.config
    assert torch.equal(f.feat_mean, m.feat_mean)
    assert (f(x, lens)[0] - ref).abs().max() < 1e-2
    assert (q(x, lens)[0] - ref).abs().max() < 0.2
    assert (tmp_path / "q.npz").stat().st_size < (tmp_path / "f.npz").stat().st_size


@needs_torch
@needs_espeak
@needs_fbank
def test_tiny_end_to_end_run(tmp_path):
    """Train (3 steps), evaluate, export, write the model set; remake the set from the weights;
    decode a WAV with the example."""
    pytest.importorskip("kaldialign")
    corpus = tmp_path / "tier"
    shutil.copytree(TINY, corpus)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-m", "benchmarks.model.train", "--corpus", str(corpus), "--out", str(out),
                          "--scale", "tiny", "--workers", "2", "--fallback-model", "cpu"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["training"]["steps"] == 3 and s["model"]["num_outputs"] == 501
    # two candidates on the same batches; the one with the lower held-out greedy WER went on
    assert [c["preset"] for c in s["candidates"]] == ["tiny", "cpu"]
    assert all(c["steps"] == 3 for c in s["candidates"])
    kept = min(s["candidates"], key=lambda c: c["greedy_wer"])
    assert s["model"]["preset"] == kept["preset"] and s["test"]["greedy"]["wer"] == kept["greedy_wer"]
    assert s["test"]["utterances"] == 6 and 0.0 <= s["test"]["hlg"]["wer"] and s["test"]["greedy"]["ref_words"] > 0
    assert s["synthesis"]["utterances"] == 16 and s["synthesis"]["utterances_per_second"] > 0
    assert (out / "summary.md").read_text().startswith("## Model on synthetic speech")
    from benchmarks.peers.corpus import load_corpus

    c = load_corpus(str(corpus), set_name="model")
    assert c.num_utts == 4 and c.vocab_size == 501
    for i in range(4):
        lp = c.log_probs[i, : c.lengths[i]]
        assert np.allclose(np.logaddexp.reduce(lp, axis=1), 0.0, atol=1e-4)
        assert all(0 < w < len(c.words) for w in c.refs[i])
    # the set's rows follow the simulator's length law: 100-600 frames of 40 ms, give or take the speech rate
    assert 40 <= int(c.lengths.mean()) <= 700
    first = np.load(corpus / "model" / "shard-00000.npz")
    (tmp_path / "again").mkdir()
    shutil.copy(corpus / "words.txt", tmp_path / "again" / "words.txt")
    remade = subprocess.run([sys.executable, "-m", "benchmarks.model.make_set", "--weights", str(out / "model.npz"),
                             "--corpus", str(corpus), "--set-corpus", str(tmp_path / "again"), "--workers", "2"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert remade.returncode == 0, remade.stderr[-3000:]
    second = np.load(tmp_path / "again" / "model" / "shard-00000.npz")
    assert second["ref_text"].tolist() == first["ref_text"].tolist()
    assert second["lengths"].tolist() == first["lengths"].tolist()  # the same audio again
    # float16 weights against the float32 model of the run: the same log-probs, to rounding
    assert np.abs(second["log_probs"] - first["log_probs"]).max() < 0.05
    wav = tmp_path / "say"
    ex = subprocess.run([sys.executable, str(ROOT / "examples" / "audio_to_words.py"), "--weights",
                         str(out / "model.int8.npz"), "--corpus", str(corpus), "--say", "it is a good day",
                         "--say-dir", str(wav), "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert ex.returncode == 0, ex.stderr[-3000:]
    line = json.loads(ex.stdout.strip().splitlines()[0])
    assert line["file"].endswith("say-0.wav") and 0.5 < line["seconds"] < 4.0
    assert all(w["start"] is not None and 0 <= w["start"] <= line["seconds"] for w in line["words"])


@needs_torch
@needs_espeak
@needs_fbank
def test_device_script_rehearsal(tmp_path):
    """scripts/device_model.sh at tiny scale on the CPU, on a copy of the tiny tier (so no
    build): every step runs and $OUT holds the 8 files that come back from the GPU machine."""
    pytest.importorskip("kaldialign")
    small, full, out = tmp_path / "small", tmp_path / "full", tmp_path / "out"
    shutil.copytree(TINY, small)
    shutil.copytree(TINY, full)
    env = dict(os.environ, MODEL_SCALE="tiny", SMALL=str(small), FULL=str(full), SET_CORPORA=str(full),
               SKIP_INSTALL="1", OUT=str(out))
    run = subprocess.run(["bash", "scripts/device_model.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["model.log", "summary.md", "summary.json", "model.npz", "model.int8.npz", "profile_model.json",
         "calibration.md", "calibration.json"])
    assert (small / "model" / "shard-00000.npz").exists() and (full / "model" / "shard-00000.npz").exists()
    profile = json.loads((out / "profile_model.json").read_text())
    from benchmarks.corpus.simulate import load_profile

    assert load_profile(out / "profile_model.json").peak == pytest.approx(profile["config"]["peak"])
    md = (out / "calibration.md").read_text()
    assert "sim --profile model" in md and "### Full tier" in md


def test_learning_rate_holds_the_peak_on_the_plateau():
    from benchmarks.model.train import SCALES, learning_rate

    sc = SCALES["base"]
    assert learning_rate(sc, 0.0, None) == 0.0
    assert abs(learning_rate(sc, sc.warmup / 2, None) - sc.peak_lr / 2) < 1e-12
    assert learning_rate(sc, 0.9, None) == sc.peak_lr  # still on the plateau: no annealing
    assert learning_rate(sc, 0.5, 0.5) == sc.peak_lr  # annealing starts where the plateau ended
    assert abs(learning_rate(sc, 1.0, 0.5) - 0.02 * sc.peak_lr) < 1e-12
    assert learning_rate(sc, 0.6, 0.5) > learning_rate(sc, 0.8, 0.5) > learning_rate(sc, 0.95, 0.5)
