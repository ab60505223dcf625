"""The peers harness (benchmarks/peers) on a toy corpus built here: CPU only, fast."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.peers import report  # noqa: E402
from benchmarks.peers.corpus import UNKNOWN_HYP, load_corpus, load_shard  # noqa: E402
from benchmarks.peers.greedy_peer import GreedyPeer  # noqa: E402
from benchmarks.peers.run import main, parse_args  # noqa: E402
from benchmarks.peers.scoring import word_errors  # noqa: E402
from benchmarks.peers.toy import PIECES, WORDS, write_toy_corpus  # noqa: E402

pytest.importorskip("kaldifst")
pytest.importorskip("kaldialign")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return str(write_toy_corpus(str(tmp_path_factory.mktemp("peers-toy")), num_utts=20, seed=3))


def _ids(*words):
    return [WORDS.index(w) for w in words]


def _log_probs(frames, V=len(PIECES)):
    """One row of log-probs whose argmax per frame is `frames` (piece names, "-" = blank)."""
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(len(frames), V)).astype(np.float32)
    for t, p in enumerate(frames):
        logits[t, 0 if p == "-" else PIECES.index(p)] += 10.0
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def test_greedy_hand_made_matrix(toy):
    corpus = load_corpus(toy)
    peer = GreedyPeer(corpus, 1, parse_args(["--corpus", toy]))
    rows = [
        # repeats merge, blanks split: "the cat cat"
        ["-", "▁the", "▁the", "-", "▁c", "at", "at", "-", "▁c", "at"],
        # a blank between equal pieces keeps both: "a a"; trailing frames beyond the length
        ["▁a", "-", "▁a", "▁ran", "▁ran"],
        # pieces that spell no word of words.txt ("cog") count as an unknown word
        ["▁c", "og", "-", "▁s", "un"],
    ]
    T = max(map(len, rows))
    lp = np.stack([np.pad(_log_probs(r), ((0, T - len(r)), (0, 0))) for r in rows])
    lengths = np.array([10, 3, 5], np.int32)
    assert peer.decode(lp, lengths) == [_ids("the", "cat", "cat"), _ids("a", "a"), [UNKNOWN_HYP] + _ids("sun")]


def test_word_errors_known_pairs():
    e = word_errors([[1, 2, 3], [4]], [[1, 3], [4, 5]])  # one deletion, one insertion
    assert (e.errors, e.ref_words, e.dels, e.ins, e.subs) == (2, 4, 1, 1, 0)
    assert e.rate == pytest.approx(0.5)
    e = word_errors([[1, 2, 3, 4]], [[1, 9, 3, 4]])
    assert (e.errors, e.subs, e.rate) == (1, 1, 0.25)
    assert word_errors([[7, 7]], [[7, 7]]).errors == 0
    assert word_errors([[]], [[1]]).rate == float("inf")
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        word_errors([[1], [2]], [[1]])


def test_shard_reference_forms(tmp_path):
    lp = np.zeros((2, 3, 4), np.float32)
    lens = np.array([3, 2])
    ids = {"<eps>": 0, "a": 1, "b": 2}
    want = [[1, 2, 2], [2]]
    forms = {
        "padded": dict(log_probs=lp, ref_word_ids=np.array([[1, 2, 2], [2, -1, -1]])),
        "fp16": dict(log_probs_fp16=lp.astype(np.float16), ref_word_ids=np.array([[1, 2, 2], [2, -1, -1]])),
        "text": dict(log_probs=lp, ref_text=np.array(["a b b", "b"])),
    }
    for name, arrays in forms.items():
        np.savez(tmp_path / f"{name}.npz", lengths=lens, **arrays)
        assert load_shard(str(tmp_path / f"{name}.npz"), ids)[2] == want, name
    np.savez(tmp_path / "none.npz", log_probs=lp, lengths=lens)
    with pytest.raises(KeyError, match="no references"):
        load_shard(str(tmp_path / "none.npz"), ids)


def _rows_by_name(rows):
    return {(r.decoder, r.batch): r for r in rows}


def test_driver_end_to_end_cpu(toy, tmp_path, capsys, monkeypatch):
    from benchmarks.peers import PeerUnavailable
    from benchmarks.peers.riva_peer import RivaPeer

    def unavailable(self, *a, **k):
        raise PeerUnavailable("riva withheld by this test")

    monkeypatch.setattr(RivaPeer, "__init__", unavailable)  # the skip path, GPU or not
    md, js = tmp_path / "docs" / "benchmarks.md", tmp_path / "rows.jsonl"
    md.parent.mkdir()
    md.write_text("# Benchmarks\n\nkept text\n")
    argv = ["--corpus", toy, "--batch", "1", "4", "--reps", "1", "--md", str(md), "--json", str(js),
            "--decoders", "greedy", "cuwfst-cpu", "riva"]
    rows = main(argv)
    out = capsys.readouterr().out
    by = _rows_by_name(rows)
    assert set(by) == {("greedy", "1 (no batching)"), ("cuwfst-cpu", "1"), ("cuwfst-cpu", "4"), ("riva", "-")}
    assert by[("riva", "-")].status.startswith("skipped: ")  # no GPU here, or withheld above
    for key in [("cuwfst-cpu", "1"), ("cuwfst-cpu", "4"), ("greedy", "1 (no batching)")]:
        r = by[key]
        assert r.status == "ok" and r.utts == 20 and r.ref_words > 0 and r.rtfx > 0, r
        assert f"| {r.decoder} | cpu | {r.graph} | {r.batch} | 20 |" in out
    # the toy graph makes the reference the only good path: the exact decoder gets it all
    assert by[("cuwfst-cpu", "1")].errors == 0 and by[("cuwfst-cpu", "4")].errors == 0
    assert "| riva | cuda | TLG.fst | - | - | - | - | - | skipped: " in out
    # a second run replaces the section instead of adding one
    main(argv)
    text = md.read_text()
    assert text.startswith("# Benchmarks\n\nkept text\n") and text.count(report.BEGIN) == 1
    assert "Command: `python -m benchmarks.peers.run --corpus" in text and "commit `" in text
    lines = [json.loads(x) for x in js.read_text().splitlines()]
    assert len(lines) == 8 and {x["decoder"] for x in lines} == {"greedy", "cuwfst-cpu", "riva"}


def test_driver_kaldi_decoder(toy):
    pytest.importorskip("kaldi_decoder")
    rows = main(["--corpus", toy, "--batch", "1", "--reps", "1",
                 "--decoders", "kaldi-decoder", "kaldi-decoder-hlg", "--cpu-utts", "12"])
    for r in rows:
        assert r.status == "ok" and r.batch == "1 (no batching)" and r.utts == 12, r
        assert r.errors == 0 and r.ref_words > 0


def test_gpu_adapters_plumbing_with_fakes(toy, monkeypatch):
    """riva and torchaudio-ctc adapters against fakes that check the argument types the real
    APIs take (the real ones need a GPU): float32 C-contiguous [B, T, V], int64 CPU lengths
    for riva, int32 lengths on the log-probs' device for torchaudio."""
    torch = pytest.importorskip("torch")
    from benchmarks.peers import riva_peer, torchaudio_peer
    from benchmarks.peers.greedy_peer import greedy_tokens

    corpus = load_corpus(toy)
    cfg = parse_args(["--corpus", toy])
    expect = GreedyPeer(corpus, 1, cfg).decode(corpus.log_probs[:4], corpus.lengths[:4])

    class FakeRiva:
        def __init__(self, config, fst, words, V):
            assert Path(fst).name == "TLG.fst" and Path(words).name == "words.txt" and V == len(PIECES)
            assert config.online_opts.lattice_postprocessor_opts.nbest == 1

        def decode_nbest(self, lp, lens):
            assert lp.dtype == torch.float32 and lp.is_contiguous() and lp.dim() == 3
            assert lens.dtype == torch.int64 and lens.device.type == "cpu"
            return [[types.SimpleNamespace(words=w)] for w in expect]

    def fake_config():
        ns = types.SimpleNamespace
        return ns(n_input_per_chunk=0, online_opts=ns(
            decoder_opts=ns(default_beam=0, lattice_beam=0, max_active=0, ntokens_pre_allocated=0,
                            blank_penalty=0.0, length_penalty=0.0),
            lattice_postprocessor_opts=ns(acoustic_scale=0, lm_scale=0, word_ins_penalty=0, nbest=0)))

    mod = types.ModuleType("riva.asrlib.decoder.python_decoder")
    mod.BatchedMappedDecoderCuda, mod.BatchedMappedDecoderCudaConfig = FakeRiva, fake_config
    for name in ("riva", "riva.asrlib", "riva.asrlib.decoder"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "riva.asrlib.decoder.python_decoder", mod)
    monkeypatch.setattr(riva_peer, "require_cuda", lambda: torch)
    lp = torch.from_numpy(corpus.log_probs[:4])
    peer = riva_peer.RivaPeer(corpus, 4, cfg)
    assert peer.decode(lp, corpus.lengths[:4]) == expect
    assert "default_beam=20 lattice_beam=8 max_active=10000" in peer.settings()

    def fake_ctc(tokens, nbest, beam_size, blank_skip_threshold):
        assert tokens == PIECES and nbest == 1 and beam_size == 10

        def run(log_probs, lengths):
            assert lengths.dtype == torch.int32 and lengths.device == log_probs.device
            return [[types.SimpleNamespace(tokens=greedy_tokens(log_probs[b].numpy(), int(n)).tolist())]
                    for b, n in enumerate(lengths)]
        return run

    ta = types.ModuleType("torchaudio")
    dec_mod = types.ModuleType("torchaudio.models.decoder")
    dec_mod.cuda_ctc_decoder = fake_ctc
    monkeypatch.setitem(sys.modules, "torchaudio", ta)
    monkeypatch.setitem(sys.modules, "torchaudio.models", types.ModuleType("torchaudio.models"))
    monkeypatch.setitem(sys.modules, "torchaudio.models.decoder", dec_mod)
    monkeypatch.setattr(torchaudio_peer, "require_cuda", lambda: torch)
    peer = torchaudio_peer.TorchaudioCtcPeer(corpus, 4, cfg)
    assert peer.decode(lp, corpus.lengths[:4]) == expect


def test_cuwfst_on_the_tlg_riva_reads(toy):
    """cuwfst-cpu-tlg decodes TLG.img, the same graph riva reads as TLG.fst; on the toy
    corpus it is as exact as on the HLG."""
    rows = main(["--corpus", toy, "--batch", "4", "--reps", "1", "--decoders", "cuwfst-cpu", "cuwfst-cpu-tlg"])
    by = _rows_by_name(rows)
    hlg, tlg = by[("cuwfst-cpu", "4")], by[("cuwfst-cpu-tlg", "4")]
    assert (hlg.graph, tlg.graph) == ("HLG.img", "TLG.img")
    assert tlg.status == "ok" and tlg.utts == 20 and tlg.errors == 0 == hlg.errors
    assert "eps_iterations=" in tlg.settings


def test_cuwfst_lattice_row(toy):
    """cuwfst-cpu-lattice decodes with lattice=True (the row issue 10 sets against riva, which
    always builds a lattice): the same words as the 1-best row, and its settings say so."""
    rows = main(["--corpus", toy, "--batch", "4", "--reps", "1", "--decoders", "cuwfst-cpu", "cuwfst-cpu-lattice"])
    by = _rows_by_name(rows)
    best, lat = by[("cuwfst-cpu", "4")], by[("cuwfst-cpu-lattice", "4")]
    assert lat.status == "ok" and lat.utts == best.utts == 20
    assert lat.errors == best.errors == 0 and lat.graph == "HLG.img"
    assert "lattice=True" in lat.settings and "lattice=True" not in best.settings


def test_cuwfst_tlg_lattice_row_and_the_search_beam_option(toy):
    """cuwfst-cpu-tlg-lattice decodes TLG.img (riva's graph) with lattice=True: the same words
    as the TLG's 1-best row; --cuwfst-search-beam sets cuwfst's search_beam alone."""
    rows = main(["--corpus", toy, "--batch", "4", "--reps", "1", "--cuwfst-search-beam", "12",
                 "--decoders", "cuwfst-cpu-tlg", "cuwfst-cpu-tlg-lattice"])
    by = _rows_by_name(rows)
    best, lat = by[("cuwfst-cpu-tlg", "4")], by[("cuwfst-cpu-tlg-lattice", "4")]
    assert lat.status == "ok" and lat.utts == best.utts == 20
    assert lat.errors == best.errors == 0 and lat.graph == best.graph == "TLG.img"
    assert "lattice=True" in lat.settings and "eps_iterations=" in lat.settings
    assert "search_beam=12 " in lat.settings and "search_beam=12 " in best.settings
    assert "output_beam=8 " in lat.settings


def test_every_pass_is_scored_and_a_spread_is_shown():
    """time_decodes keeps every pass's hypotheses (warm-up first); the table shows the last
    pass's WER and, where the passes disagree, their range (riva's 1-best is not the same
    from run to run on identical inputs)."""
    from benchmarks.peers.measure import time_decodes

    class Flaky:
        name = "flaky"

        def __init__(self):
            self.calls = 0

        def decode(self, lp, lens):
            self.calls += 1
            return [[self.calls]] * len(lens)  # each pass returns other word ids

    times, passes = time_decodes(Flaky(), np.zeros((4, 3, 2)), np.full(4, 3), 2, 3)
    assert len(times) == 3 and len(passes) == 4
    assert [(p[0][0], p[-1][0]) for p in passes] == [(1, 2), (3, 4), (5, 6), (7, 8)]  # two batches a pass
    row = report.Row("riva", "cuda", "TLG.fst", "32", utts=4, wer_percent=2.22, errors=25, ref_words=1125, rtfx=1.0,
                     wer_passes=[2.04, 2.31, 2.22, 2.22])
    assert "| 2.22 (25/1125); passes 2.04-2.31 |" in report.table([row])
    row.wer_percent, row.wer_passes = 2.13, [2.13] * 4  # an exact decoder: the same every pass
    assert "| 2.13 (25/1125) |" in report.table([row]) and "passes" not in report.table([row])
