"""Golden fixtures for cuwfst from REAL k2 (``intersect_dense_pruned`` + ``shortest_path``).

Generate mode (default) writes a gzip JSON list of random cases: epsilon-free CTC-like
transducer graphs (4..400 states, out-degree 1..12, blank self-loops, parallel arcs to
one destination, final arcs with ilabel/olabel -1), float32 log-softmax batches (random
and peaky CTC-like, -30.0 padding past each row's length) and a spread of beam settings,
each answered by k2.  Rerun (deterministic, fixed seed) with::

    /opt/k2-venv/bin/python tests/goldens/make_k2_goldens.py --out tests/data/k2_goldens.json.gz

Answer mode recomputes the ``rows`` of any fixture file in this format with the installed
k2 (cases needing ``allow_partial`` are skipped when k2 lacks it, e.g. 1.23.4)::

    /opt/k2-venv/bin/python tests/goldens/make_k2_goldens.py --answer IN.json.gz --out OUT.json.gz

Case format (the format of /work/shared/data/k2-allow-partial-cases.json.gz plus ``name``
and ``arcs``): ``name``, ``graph`` (k2 text ``src dst ilabel olabel score``, arcs in k2's
arc-sorted order, so text arc i == k2 arc i; last line the final state), ``vocab``,
``lens``, ``log_probs`` [rows][max_len][vocab] (exact float32 values), ``beams``
[search_beam, output_beam, min_active_states, max_active_states], ``allow_partial``
(always false here), ``rows``: per row ``words`` (olabels > 0 on the best path),
``score`` (double total score, null when -inf), ``empty`` and ``arcs`` (0-based graph arc
indices of the best path, the final ilabel -1 arc included).
"""
import argparse
import gzip
import inspect
import json
import math
import sys
import time

import numpy as np
import torch

import k2

SEED = 20261129
PAD = -30.0
# (search_beam, output_beam, min_active_states, max_active_states); k2 needs max > min.
BEAMS = [
    (20.0, 8.0, 30, 10000),  # loose (icefall defaults)
    (8.0, 5.0, 5, 200),  # medium
    (3.0, 2.0, 1, 50),  # tight beam
    (15.0, 8.0, 1, 4),  # max_active tiny: dynamic beam shrinks each frame
    (20.0, 8.0, 2, 6),  # likewise
    (2.0, 2.0, 100, 1000),  # min_active large: beam widens
    (12.0, 3.0, 0, 500),  # no min_active constraint
    (1.0, 1.0, 1, 10000),  # very tight search beam, no max constraint
    (30.0, 15.0, 1, 2),  # max_active 2
    (6.0, 0.5, 10, 20),  # small output beam, narrow active window
]
SIZE_CLASSES = [(4, 8), (9, 30), (31, 120), (121, 400)]  # number of states incl. final
REPS = 16  # cases = REPS * len(BEAMS)
HAS_ALLOW_PARTIAL = "allow_partial" in inspect.signature(k2.intersect_dense_pruned).parameters


# ----------------------------------------------------------------------------- graphs
def make_graph_text(rng, n_states, max_deg, vocab, n_words):
    """Random epsilon-free CTC-like transducer, k2 text, arcs grouped by source state."""
    final = n_states - 1
    n = final  # non-final states 0..n-1
    deg = rng.integers(1, max_deg + 1, size=n)
    p_blank = rng.uniform(0.1, 0.5)  # ilabel 0 (blank) share on ordinary arcs
    p_loop = rng.uniform(0.0, 1.0)  # share of states with a blank self-loop
    p_word = rng.uniform(0.2, 0.7)  # share of arcs carrying a word
    p_parallel = rng.uniform(0.0, 0.5)  # extra arc reuses an existing destination
    arcs = [[] for _ in range(n)]  # per state: (dst, ilabel, olabel, score)
    seen = [set() for _ in range(n)]

    def score():
        if rng.random() < 0.07:
            return round(float(rng.uniform(0.0, 2.0)), 4)
        return round(float(rng.uniform(-4.0, 0.0)), 4)

    def add(s, d, ilabel=None):
        for _ in range(20):  # avoid exact twins (same dst, ilabel, score): no exact ties
            il = ilabel if ilabel is not None else (
                0 if rng.random() < p_blank else int(rng.integers(1, vocab)))
            w = score()
            if (d, il, w) not in seen[s]:
                break
        seen[s].add((d, il, w))
        ol = int(rng.integers(1, n_words + 1)) if rng.random() < p_word else 0
        arcs[s].append((d, il, ol, w))

    # spanning tree from state 0 (respecting out-degrees) so every state is reachable
    order = [0] + list(rng.permutation(np.arange(1, n)))
    for i in range(1, n):
        parents = [p for p in order[:i] if len(arcs[p]) < deg[p]]
        add(int(rng.choice(parents)), int(order[i]))
    for s in range(n):
        while len(arcs[s]) < deg[s]:
            if arcs[s] and rng.random() < p_parallel:
                d = arcs[s][int(rng.integers(len(arcs[s])))][0]
            else:
                d = int(rng.integers(n))
            add(s, d)
        if rng.random() < p_loop:
            add(s, s, ilabel=0)
    # final arcs (ilabel -1, olabel -1) from one, a few or many states
    r = rng.random()
    k = 1 if r < 0.3 else (int(rng.integers(2, 5)) if r < 0.5 else int(rng.integers(n // 2, n) + 1))
    k = max(1, min(k, n))
    finals = set(rng.choice(n, size=k, replace=False).tolist())
    lines = []
    for s in range(n):
        a = list(arcs[s])
        if s in finals:
            a.append((final, -1, -1, 0.0 if rng.random() < 0.2 else round(float(rng.uniform(-3, 0)), 4)))
        for j in rng.permutation(len(a)):  # k2 sorts; give it shuffled input
            d, il, ol, w = a[j]
            lines.append(f"{s} {d} {il} {ol} {w}")
    lines.append(str(final))
    return "\n".join(lines) + "\n"


def fmt32(x):
    """Shortest decimal that reads back as this float32."""
    return np.format_float_positional(np.float32(x), trim="-")


def fsa_to_text(fsa):
    a = fsa.arcs.values()[:, :3].tolist()
    aux, sc = fsa.aux_labels.tolist(), fsa.scores.tolist()
    lines = [f"{s} {d} {il} {ol} {fmt32(w)}" for (s, d, il), ol, w in zip(a, aux, sc)]
    return "\n".join(lines + [str(fsa.shape[0] - 1)]) + "\n"


def misplaced_final_arcs(fsa):
    """States whose ilabel -1 arcs are not all at the end of their arc range."""
    bad, a = 0, fsa.arcs.values()[:, :3].tolist()
    for s in range(fsa.shape[0]):
        labs = [il for src, _, il in a if src == s]
        if -1 in labs and any(x != -1 for x in labs[labs.index(-1):]):
            bad += 1
    return bad


def sorted_graph(text):
    """Arc-sort with k2 and write the text from the sorted FSA; verify it round-trips."""
    g = k2.arc_sort(k2.Fsa.from_str(text, acceptor=False))
    out = fsa_to_text(g)
    g2, amap = k2.arc_sort(k2.Fsa.from_str(out, acceptor=False), ret_arc_map=True)
    assert torch.equal(amap, torch.arange(g.num_arcs, dtype=torch.int32)), "resort moved arcs"
    assert torch.equal(g2.arcs.values(), g.arcs.values())
    assert torch.equal(g2.scores, g.scores) and torch.equal(g2.aux_labels, g.aux_labels)
    return out, g


# ----------------------------------------------------------------------------- log-probs
def make_log_probs(rng, lens, vocab, style):
    T = max(lens)
    if style == "random":
        logits = rng.standard_normal((len(lens), T, vocab)) * rng.uniform(1.0, 4.0)
    else:  # peaky CTC-like: blank dominant on ~70% of frames, else one token spikes
        logits = rng.standard_normal((len(lens), T, vocab)) * rng.uniform(0.3, 1.5)
        spike = np.where(rng.random((len(lens), T)) < 0.7, 0, rng.integers(1, vocab, (len(lens), T)))
        np.put_along_axis(logits, spike[..., None], rng.uniform(5.0, 12.0, (len(lens), T, 1)), 2)
    lp = torch.from_numpy(logits.astype(np.float32)).log_softmax(-1).numpy()
    for r, n in enumerate(lens):
        lp[r, n:, :] = PAD
    return lp


# ----------------------------------------------------------------------------- k2 decoding
def decode(graph_text, lens, log_probs, beams, allow_partial=False):
    """Run k2; per row words/score/empty/arcs (arcs index the graph text's arcs)."""
    g = k2.Fsa.from_str(graph_text, acceptor=False)
    g.arc_id = torch.arange(1, g.num_arcs + 1, dtype=torch.int32)  # 0 = unmapped arc
    g = k2.arc_sort(g)
    lp = torch.tensor(np.asarray(log_probs, dtype=np.float32))
    segs = torch.tensor([[i, 0, n] for i, n in enumerate(lens)], dtype=torch.int32)
    dense = k2.DenseFsaVec(lp, segs)
    s, o, mn, mx = beams
    kw = {"allow_partial": True} if allow_partial else {}
    lat = k2.intersect_dense_pruned(g, dense, float(s), float(o), int(mn), int(mx), **kw)
    best = k2.shortest_path(lat, use_double_scores=True)
    tot = best.get_tot_scores(use_double_scores=True, log_semiring=False).tolist()
    splits = best.arcs.shape().row_splits(2)[best.arcs.shape().row_splits(1).long()].tolist()
    aux, ids = best.aux_labels.tolist(), best.arc_id.tolist()
    rows = []
    for r in range(len(lens)):
        b, e = splits[r], splits[r + 1]
        empty = b == e
        assert empty or allow_partial or aux[e - 1] == -1, "final arc's aux label is not -1"
        sc = tot[r]
        rows.append({"words": [x for x in aux[b:e] if x > 0],
                     "score": None if empty or not math.isfinite(sc) else sc,
                     "empty": empty, "arcs": [i - 1 for i in ids[b:e]]})
    return rows


def check_row(row, n, lp_row, gsrc, gdst, gil, gol, gsc, final):
    """Re-derive the row's score and words from its arcs: path must be valid and exact."""
    if row["empty"]:
        assert row["arcs"] == [] and row["words"] == []
        return
    arcs = row["arcs"]
    assert len(arcs) == n + 1, (len(arcs), n)
    assert gsrc[arcs[0]] == 0 and gdst[arcs[-1]] == final and gil[arcs[-1]] == -1
    assert gol[arcs[-1]] == -1, "final arc aux label is not -1"
    assert all(gdst[a] == gsrc[b] for a, b in zip(arcs, arcs[1:]))
    assert all(gil[a] >= 0 for a in arcs[:-1])
    total = sum(float(gsc[a]) + float(lp_row[t, gil[a]]) for t, a in enumerate(arcs[:-1]))
    total += float(gsc[arcs[-1]])
    assert abs(total - row["score"]) < 1e-4, (total, row["score"])
    assert row["words"] == [gol[a] for a in arcs if gol[a] > 0]


def check_case(case):
    g = k2.Fsa.from_str(case["graph"], acceptor=False)  # text order == arc ids
    a = g.arcs.values().tolist()
    gsrc, gdst, gil = [x[0] for x in a], [x[1] for x in a], [x[2] for x in a]
    gol, gsc, final = g.aux_labels.tolist(), g.scores.numpy(), g.shape[0] - 1
    lp = np.asarray(case["log_probs"], dtype=np.float32)
    for r, (row, n) in enumerate(zip(case["rows"], case["lens"])):
        check_row(row, n, lp[r], gsrc, gdst, gil, gol, gsc, final)


# ----------------------------------------------------------------------------- modes
def random_lens(rng, big):
    b = int(rng.integers(1, 6))
    hi = 150 if big and rng.random() < 0.35 else 60
    cand = rng.permutation(np.arange(2, hi + 1))[:b].tolist()
    if rng.random() < 0.4:  # length-1 rows
        cand[int(rng.integers(b))] = 1
    return [int(x) for x in cand]


def generate(out_path):
    rng = np.random.default_rng(SEED)
    cases, stats = [], {"misplaced": 0, "batch_checked": 0}
    for rep in range(REPS):
        for bi, beams in enumerate(BEAMS):
            cls = (rep + bi) % len(SIZE_CLASSES)
            n_states = int(rng.integers(SIZE_CLASSES[cls][0], SIZE_CLASSES[cls][1] + 1))
            max_deg = int(rng.choice([1, 2, 3, 4, 6, 8, 12]))
            vocab = int(rng.integers(3, 41))
            n_words = int(rng.integers(1, 51))
            text, g = sorted_graph(make_graph_text(rng, n_states, max_deg, vocab, n_words))
            stats["misplaced"] += misplaced_final_arcs(g)
            style = "peaky" if rng.random() < 0.5 else "random"
            lens = random_lens(rng, big=cls >= 2)
            lp = make_log_probs(rng, lens, vocab, style)
            name = f"c{len(cases):03d}_s{n_states}_d{max_deg}_v{vocab}_{style}_b{bi}"
            case = {"name": name, "graph": text, "vocab": vocab, "lens": lens,
                    "log_probs": [[[float(x) for x in fr] for fr in row] for row in lp],
                    "beams": list(beams), "allow_partial": False}
            case["rows"] = decode(text, lens, lp, beams)
            check_case(case)
            if len(lens) > 1:  # batching must not change a row's result
                for r, n in enumerate(lens):
                    alone = decode(text, [n], lp[r:r + 1, :n], beams)[0]
                    assert alone == case["rows"][r], (name, r, alone, case["rows"][r])
                stats["batch_checked"] += 1
            cases.append(case)
    write(out_path, cases)
    rows = [r for c in cases for r in c["rows"]]
    print(f"{len(cases)} cases, {len(rows)} rows, {sum(r['empty'] for r in rows)} empty; "
          f"states with ilabel -1 arcs not last: {stats['misplaced']}; "
          f"batch-independence checked on {stats['batch_checked']} cases")


def answer(in_path, out_path):
    with gzip.open(in_path, "rt") as f:
        cases = json.load(f)
    done, skipped_partial, skipped_zero = [], 0, 0
    for case in cases:
        partial = bool(case.get("allow_partial", False))
        if partial and not HAS_ALLOW_PARTIAL:
            skipped_partial += 1
            continue
        if min(case["lens"]) < 1:  # k2.DenseFsaVec asserts duration > 0
            skipped_zero += 1
            continue
        case = dict(case)
        case["rows"] = decode(case["graph"], case["lens"], case["log_probs"], case["beams"],
                              allow_partial=partial)
        if not partial:  # redirected allow_partial arcs have no graph arc to check
            check_case(case)
        done.append(case)
    write(out_path, done)
    print(f"answered {len(done)} cases; skipped {skipped_partial} allow_partial cases "
          f"(k2 has allow_partial: {HAS_ALLOW_PARTIAL}) and {skipped_zero} with zero-length rows")


def write(path, cases):
    with gzip.open(path, "wt", compresslevel=9) as f:
        json.dump(cases, f, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--answer", metavar="IN", help="recompute rows of this fixture file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    answer(args.answer, args.out) if args.answer else generate(args.out)
    print(f"wrote {args.out} in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
