"""The benchmark corpus: the shipped tiny tier, the builders' parts, the simulator.

No full LM is needed: the tiny tier ships in cuwfst/data/tiny (built by
`python -m benchmarks.corpus.build --tier tiny --out cuwfst/data/tiny`) and the fixture
tests/data/sim_tiny.npz was written by
`python -m benchmarks.corpus.simulate --corpus cuwfst/data/tiny --fixture --out tests/data/sim_tiny.npz --num-utts 4 --seed 0`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "cuwfst" / "data" / "tiny"
FIXTURE = ROOT / "tests" / "data" / "sim_tiny.npz"
V = 501  # <blk> + 500 pieces


def read_table(path: Path) -> dict[str, int]:
    return {s: int(i) for s, i in (ln.split() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip())}


def read_lexicon(path: Path) -> list[tuple[str, list[str]]]:
    return [(ln.split()[0], ln.split()[1:]) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def hlg():
    return Graph.load(TINY / "HLG.img")


@pytest.fixture(scope="module")
def tlg():
    return Graph.load(TINY / "TLG.img")


def emitting_ilabels(g: Graph) -> np.ndarray:
    il = g.arrays.ilabel
    return il[il >= 0]


# ---------------------------------------------------------------------------- the tiny tier
def test_tiny_tier_is_complete_and_small():
    names = ["HLG.fst", "HLG.img", "TLG.fst", "TLG.img", "bpe.model", "tokens.txt", "words.txt",
             "lexicon.txt", "lexicon_disambig.txt", "lm.arpa.gz", "stats.json"]
    for n in names:
        assert (TINY / n).is_file(), n
    total = sum(p.stat().st_size for p in TINY.iterdir() if p.is_file())
    # 6 MB, not 5: since the graphs sort each state's emitting arcs (label 0 first, then by
    # weight), both images carry an arc_id section (4 bytes an arc: +0.54 MB together)
    assert total < 6_000_000, f"tiny tier is {total} bytes"


def test_tiny_hlg_is_epsilon_free_with_token_ilabels(hlg):
    assert hlg.num_epsilon_arcs == 0 and not hlg.has_epsilon
    assert hlg.vocab_size == V
    il = emitting_ilabels(hlg)
    assert il.size + hlg.num_final_arcs == hlg.num_arcs  # every other arc reads a token
    assert il.min() == 0 and il.max() < V
    assert hlg.num_final_arcs > 0


def test_tiny_tlg_has_acyclic_epsilons(tlg):
    assert tlg.num_epsilon_arcs > 0
    assert tlg.max_epsilon_chain >= 1  # -1 would mean an epsilon cycle
    il = emitting_ilabels(tlg)
    assert il.min() == 0 and il.max() < V
    assert tlg.num_final_arcs > 0


@pytest.mark.parametrize("name", ["HLG", "TLG"])
def test_fst_file_and_image_hold_one_graph(name):
    a = Graph.from_openfst(TINY / f"{name}.fst", token_offset=1, vocab_size=V).arrays
    b = Graph.load(TINY / f"{name}.img").arrays
    for field in ("row_splits", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


def test_symbol_tables_agree_with_lexicon_and_graphs(hlg, tlg):
    tokens = read_table(TINY / "tokens.txt")
    words = read_table(TINY / "words.txt")
    lexicon = read_lexicon(TINY / "lexicon.txt")
    lex_disambig = read_lexicon(TINY / "lexicon_disambig.txt")
    # tokens.txt: <blk> 0, 500 pieces, then #0, #1, ... ; words.txt: <eps> 0, words, #0 <s> </s>
    assert tokens["<blk>"] == 0 and sorted(tokens.values()) == list(range(len(tokens)))
    assert [s for s, i in tokens.items() if i >= V] == [f"#{k}" for k in range(len(tokens) - V)]
    by_id = sorted(words, key=words.get)
    assert by_id[0] == "<eps>" and by_id[-3:] == ["#0", "<s>", "</s>"]
    assert sorted(words.values()) == list(range(len(words)))
    # the lexicon spells every word of words.txt with pieces (no disambiguation symbols)
    assert [w for w, _ in lexicon] == by_id[1:-3]
    lex_tokens = {tokens[p] for _, ps in lexicon for p in ps}
    assert all(0 < t < V for t in lex_tokens)
    for (w1, p1), (w2, p2) in zip(lexicon, lex_disambig):
        assert w1 == w2 and p2[: len(p1)] == p1 and all(p.startswith("#") for p in p2[len(p1):])
    # the graphs output every word and nothing else, and read only blank and lexicon pieces
    for g in (hlg, tlg):
        out = set(np.unique(g.arrays.aux_pool).tolist())
        assert out == {words[w] for w, _ in lexicon}
        assert set(np.unique(emitting_ilabels(g)).tolist()) == lex_tokens | {0}


def test_stats_json_describes_the_shipped_graphs(hlg, tlg):
    stats = json.loads((TINY / "stats.json").read_text())
    for name, g in (("HLG", hlg), ("TLG", tlg)):
        s = stats[name]
        assert (s["states"], s["arcs"], s["epsilon_arcs"]) == (g.num_states, g.num_arcs, g.num_epsilon_arcs)
        assert s["image_bytes"] == (TINY / f"{name}.img").stat().st_size
        assert s["out_degree"]["max"] == int(np.diff(g.arrays.row_splits).max())
    assert stats["HLG"]["epsilon_arcs"] == 0
    assert {"hostname", "cores"} <= set(stats["machine"])
    assert stats["total_seconds"] > 0 and stats["peak_rss_mb"] > 0


def test_rebuilding_tiny_from_its_own_lm_gives_the_same_graphs(tmp_path):
    pytest.importorskip("kaldilm")
    pytest.importorskip("kaldifst")
    pytest.importorskip("sentencepiece")
    from benchmarks.corpus.build import build

    build("tiny", tmp_path, TINY / "lm.arpa.gz", bpe_model=str(TINY / "bpe.model"), log=lambda *a: None)
    for name in ("HLG", "TLG"):
        a, b = Graph.load(tmp_path / f"{name}.img").arrays, Graph.load(TINY / f"{name}.img").arrays
        assert (a.num_states, a.num_arcs) == (b.num_states, b.num_arcs), name
        np.testing.assert_array_equal(a.ilabel, b.ilabel)
        np.testing.assert_allclose(a.weight, b.weight, atol=1e-4)  # the ARPA was rounded to 6 decimals
    for name in ("tokens.txt", "words.txt", "lexicon.txt"):
        assert (tmp_path / name).read_text() == (TINY / name).read_text()
    # graphs=("HLG",): the same HLG, no TLG (a GPU call that reads the HLG alone)
    only = tmp_path / "hlg_only"
    stats = build("tiny", only, TINY / "lm.arpa.gz", bpe_model=str(TINY / "bpe.model"), log=lambda *a: None,
                  graphs=("HLG",))
    assert "TLG" not in stats and "TLG" not in stats["stages"] and not (only / "TLG.img").exists()
    np.testing.assert_array_equal(Graph.load(only / "HLG.img").arrays.ilabel,
                                  Graph.load(tmp_path / "HLG.img").arrays.ilabel)
    with pytest.raises(ValueError, match="graphs"):
        build("tiny", tmp_path / "bad", TINY / "lm.arpa.gz", graphs=("LG",))


# ---------------------------------------------------------------------------- builder parts
def test_add_disambig_marks_prefixes_and_homophones():
    from benchmarks.corpus.units import add_disambig

    lex = [("a", ["▁a"]), ("ab", ["▁a", "b"]), ("x", ["▁x"]), ("y", ["▁x"]), ("z", ["▁z"])]
    out, max_k = add_disambig(lex)
    assert out == [("a", ["▁a", "#1"]), ("ab", ["▁a", "b"]), ("x", ["▁x", "#1"]), ("y", ["▁x", "#2"]),
                   ("z", ["▁z"])]
    assert max_k == 2


def test_ctc_topology_matches_k2_ctc_topo():
    from benchmarks.corpus.topo import ctc_topology

    h = ctc_topology(4)
    assert (h.num_states, h.num_arcs) == (4, 16) and np.isfinite(h.final).all()
    src = h.src
    for s, i, o, d in zip(src, h.ilabel, h.olabel, h.nextstate):
        tok = i - 1
        assert d == tok  # token t always leads to state t
        assert o == (0 if tok in (0, s) else i)  # blank and repeats output nothing
    t = ctc_topology(4, disambig_olabels=[6, 7])
    loops = t.ilabel == 0
    assert loops.sum() == 8 and (t.nextstate[loops] == t.src[loops]).all()


def _random_graph(rng, n=7):
    """Random transducer with acyclic, word-free epsilon arcs (as arrays)."""
    from benchmarks.corpus.fstio import FstArrays

    src, il, ol, w, dst = [], [], [], [], []
    for s in range(n):
        for _ in range(int(rng.integers(1, 4))):
            src.append(s), il.append(int(rng.integers(1, 4))), dst.append(int(rng.integers(n)))
            ol.append(int(rng.choice([0, 0, 11, 12, 13]))), w.append(float(rng.uniform(0, 2)))
        for _ in range(int(rng.integers(0, 3)) if s + 1 < n else 0):
            src.append(s), il.append(0), ol.append(0), dst.append(int(rng.integers(s + 1, n)))
            w.append(float(rng.uniform(0, 2)))
    final = np.where(rng.random(n) < 0.4, rng.uniform(0, 1, n), np.inf).astype(np.float32)
    final[-1] = 0.5
    return FstArrays.from_arcs(num_states=n, start=0, final=final, src=src, ilabel=il, olabel=ol,
                               weight=w, nextstate=dst)


def _walks(fst, rng, count=30):
    """Input strings of random successful paths (epsilons skipped)."""
    out = []
    for _ in range(count * 20):
        s, labels = fst.start, []
        for _ in range(12):
            if np.isfinite(fst.final[s]) and rng.random() < 0.3:
                out.append(labels)
                break
            a = int(rng.integers(fst.row_splits[s], fst.row_splits[s + 1])) if fst.row_splits[s + 1] > fst.row_splits[s] else -1
            if a < 0:
                break
            if fst.ilabel[a]:
                labels.append(int(fst.ilabel[a]))
            s = int(fst.nextstate[a])
        if len(out) == count:
            break
    return out


def _best(kf_fst, labels):
    import kaldifst

    path = kaldifst.shortest_path(kaldifst.compose(kaldifst.make_linear_acceptor(labels), kf_fst))
    ok, _, osyms, weight = kaldifst.get_linear_symbol_sequence(path)
    return ok, list(osyms), weight.value


@pytest.mark.parametrize("seed", range(8))
def test_remove_input_epsilons_keeps_best_paths(tmp_path, seed):
    pytest.importorskip("kaldifst")
    from benchmarks.corpus.fstio import to_kaldifst
    from benchmarks.corpus.rmeps import remove_input_epsilons

    rng = np.random.default_rng(seed)
    g = _random_graph(rng)
    assert (g.ilabel == 0).any()
    h = remove_input_epsilons(g)
    assert not (h.ilabel == 0).any()
    kg, kh = to_kaldifst(g, tmp_path / "g.fst"), to_kaldifst(h, tmp_path / "h.fst")
    walks = _walks(g, rng)
    assert walks
    for labels in walks:
        ok_g, out_g, cost_g = _best(kg, labels)
        ok_h, out_h, cost_h = _best(kh, labels)
        assert ok_g and ok_h
        assert math.isclose(cost_g, cost_h, abs_tol=1e-4), labels
        assert out_g == out_h, labels


def test_remove_input_epsilons_puts_a_delayed_word_on_the_preceding_arc(tmp_path):
    """The LG pattern: "a" (▁a #1) is a prefix of "ab" (▁a b), so determinization emits "a"
    on the #1 arc; after #1 -> epsilon the word must ride on the ▁a arc, not on a final weight."""
    from benchmarks.corpus.fstio import FstArrays
    from benchmarks.corpus.rmeps import remove_input_epsilons

    # 0 -▁a-> 1; 1 -#1:a-> 2 (final, LM state after "a"); 1 -b:ab-> 0; 2 -backoff-> 0; 0 -c:c-> 0;
    # two more arcs into 1 make k2's size rule pick "combine with the following arcs" for #1
    g = FstArrays.from_arcs(num_states=3, start=0, final=[0.0, np.inf, 0.25],
                            src=[0, 1, 1, 2, 0, 0, 0], ilabel=[1, 0, 2, 0, 3, 4, 5],
                            olabel=[0, 21, 22, 0, 23, 0, 0], weight=[0.5, 0.0, 1.0, 0.75, 2.0, 1.0, 1.0],
                            nextstate=[1, 2, 0, 0, 0, 1, 1])
    h = remove_input_epsilons(g)
    assert not (h.ilabel == 0).any()
    arcs = set(zip(h.src.tolist(), h.ilabel.tolist(), h.olabel.tolist(), h.nextstate.tolist(),
                   np.round(h.weight, 4).tolist()))
    assert (0, 1, 21, 2, 0.5) in arcs  # ▁a then #1: "a", into the final LM state
    assert (0, 1, 21, 0, 1.25) in arcs  # ... and through its backoff
    assert np.isinf(h.final[1])  # the word is never dropped onto a final weight


def test_remove_input_epsilons_refuses_two_words_on_one_arc():
    from benchmarks.corpus.fstio import FstArrays
    from benchmarks.corpus.rmeps import remove_input_epsilons

    g = FstArrays.from_arcs(num_states=3, start=0, final=[np.inf, np.inf, 0.0], src=[0, 1],
                            ilabel=[1, 0], olabel=[5, 6], weight=[0.0, 0.0], nextstate=[1, 2])
    with pytest.raises(ValueError, match="two words"):
        remove_input_epsilons(g)


def test_pruned_lm_is_normalized_and_consistent():
    from benchmarks.corpus.arpa import ArpaLM, prune

    rng = np.random.default_rng(0)
    vocab = ["</s>", "<s>"] + [f"w{i}" for i in range(12)]
    Vw = len(vocab)
    uni = rng.dirichlet(np.ones(Vw - 1))
    uni_lp = np.insert(np.log10(uni), 1, -99.0)
    bi = sorted({(int(a), int(b)) for a, b in rng.integers(0, Vw, (80, 2)) if a != 0 and b != 1})
    tri = sorted({(a, b, int(c)) for (a, b) in bi for c in rng.integers(0, Vw, 2)
                  if b != 0 and c != 1 and (b, int(c)) in set(bi)})
    lp2 = np.log10(rng.uniform(0.01, 0.05, len(bi)))  # explicit mass < 1 per history
    lp3 = np.log10(rng.uniform(0.01, 0.1, len(tri)))
    lm = ArpaLM(vocab=vocab, ngrams=[(np.arange(Vw, dtype=np.int32)[:, None], uni_lp, np.zeros(Vw)),
                                     (np.array(bi, np.int32), lp2, np.zeros(len(bi))),
                                     (np.array(tri, np.int32), lp3, np.zeros(len(tri)))])
    p = prune(lm, 8, [40, 20])
    assert p.counts[0] == 10 and p.counts[1] <= 40 and p.counts[2] <= 20
    kept = {p.vocab[i] for i in p.ngrams[0][0][:, 0]}
    top = [vocab[i] for i in np.argsort(-uni_lp) if vocab[i] not in ("<s>", "</s>")][:8]
    assert kept == set(top) | {"<s>", "</s>"}
    P = [{tuple(r): (10.0 ** a, 10.0 ** b) for r, a, b in zip(ids.tolist(), lp, bo)} for ids, lp, bo in p.ngrams]
    bigram_ids = set(P[1])
    for (a, b, c) in P[2]:
        assert (a, b) in bigram_ids and (b, c) in bigram_ids

    def prob(w, h):
        if len(h) == 2 and (h[0], h[1], w) in P[2]:
            return P[2][(h[0], h[1], w)][0]
        if len(h) == 2:
            return (P[1][h][1] if h in P[1] else 1.0) * prob(w, h[1:])
        if (h[0], w) in P[1]:
            return P[1][(h[0], w)][0]
        return P[0][(h[0],)][1] * P[0][(w,)][0]

    bos = p.vocab.index("<s>")
    words = [i for i in range(len(p.vocab)) if i != bos]
    histories = [(i,) for i in range(len(p.vocab)) if p.vocab[i] != "</s>"] + [h for h in P[1] if h[1] != 0]
    for h in histories:
        assert math.isclose(sum(prob(w, h) for w in words), 1.0, rel_tol=1e-9), h


# ---------------------------------------------------------------------------- the simulator
@pytest.fixture(scope="module")
def simulator():
    from benchmarks.corpus.simulate import Simulator

    return Simulator(TINY)


def test_simulator_is_deterministic(simulator):
    a = simulator.utterance(seed=3, index=1)
    b = simulator.utterance(seed=3, index=1)
    c = simulator.utterance(seed=4, index=1)
    np.testing.assert_array_equal(a["log_probs"], b["log_probs"])
    assert a["words"] == b["words"]
    assert a["log_probs"].shape != c["log_probs"].shape or not np.array_equal(a["log_probs"], c["log_probs"])


def test_simulated_posteriors_are_peaky_with_70_percent_blank(simulator):
    b = simulator.batch(6, seed=11)
    lens = b["lengths"]
    assert ((lens >= 100) & (lens <= 600)).all()
    assert b["log_probs"].shape[2] == V
    frames = np.concatenate([b["log_probs"][i, : lens[i]] for i in range(len(lens))])
    np.testing.assert_allclose(np.log(np.exp(frames.astype(np.float64)).sum(axis=1)), 0.0, atol=1e-4)
    best = frames.argmax(axis=1)
    assert 0.62 < (best == 0).mean() < 0.78
    assert np.median(frames.max(axis=1)) > -0.05  # the winner takes nearly all the mass


def test_fixture_is_what_the_simulator_writes(simulator):
    d = np.load(FIXTURE)
    assert d["log_probs_fp16"].dtype == np.float16 and d["log_probs_fp16"].shape[2] == V
    for row, (seed, index) in enumerate(d["utt_seed"].tolist()):
        u = simulator.utterance(seed, index)
        n = int(d["lengths"][row])
        assert u["log_probs"].shape[0] == n
        np.testing.assert_array_equal(u["log_probs"].astype(np.float16), d["log_probs_fp16"][row, :n])
        assert " ".join(u["words"]) == str(d["ref_text"][row])


def test_hlg_decoding_beats_greedy_on_the_fixture(hlg, tlg):
    import kaldialign

    from benchmarks.corpus.evaluate import greedy_words

    d = np.load(FIXTURE)
    lp = d["log_probs_fp16"].astype(np.float32)
    lens = d["lengths"]
    tokens = read_table(TINY / "tokens.txt")
    pieces = [p for p, _ in sorted(tokens.items(), key=lambda kv: kv[1])][:V]
    words = {i: w for w, i in read_table(TINY / "words.txt").items()}
    refs = [str(t).split() for t in d["ref_text"]]
    opts = DecoderOptions(search_beam=20.0, output_beam=8.0, min_active_states=30, max_active_states=10000)
    hyp_h = [[words[w] for w in h.words] for h in Decoder(hlg, opts).decode(lp, lens)]
    hyp_t = [[words[w] for w in h.words] for h in Decoder(tlg, opts).decode(lp, lens)]
    greedy = [greedy_words(lp[i], int(lens[i]), pieces) for i in range(len(lens))]

    def errors(hyps):
        return sum(kaldialign.edit_distance(r, h)["total"] for r, h in zip(refs, hyps))

    n_ref = sum(len(r) for r in refs)
    assert errors(greedy) > 0
    assert errors(hyp_h) < errors(greedy), (errors(hyp_h), errors(greedy))
    assert errors(hyp_h) / n_ref < 0.05
    assert hyp_t == hyp_h  # HLG and TLG hold the same language and scores


def test_kaldi_decoder_reads_the_fst_files_and_agrees(hlg):
    """kaldi-decoder (Kaldi's FasterDecoder on OpenFst graphs, ilabel = token + 1) finds the
    same 1-best words and total scores as cuwfst on both HLG.fst and TLG.fst."""
    kd = pytest.importorskip("kaldi_decoder")
    kaldifst = pytest.importorskip("kaldifst")
    d = np.load(FIXTURE)
    lp = d["log_probs_fp16"].astype(np.float32)
    lens = d["lengths"]
    ours = Decoder(hlg, DecoderOptions(search_beam=20.0, max_active_states=10000)).decode(lp, lens)
    for name in ("HLG", "TLG"):
        fst = kaldifst.StdVectorFst.read(str(TINY / f"{name}.fst"))  # the decoder keeps a pointer only
        dec = kd.FasterDecoder(fst, kd.FasterDecoderOptions(max_active=10000, beam=20.0))
        for i, h in enumerate(ours):
            dec.decode(kd.DecodableCtc(lp[i, : lens[i]]))
            ok, path = dec.get_best_path()
            ok, _, words, cost = kaldifst.get_linear_symbol_sequence(path)
            assert ok and list(words) == h.words, (name, i)
            assert math.isclose(-(cost.value1 + cost.value2), h.score, abs_tol=1e-3), (name, i)
