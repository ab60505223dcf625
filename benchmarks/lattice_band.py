"""The lattice trim's extra slots (issue 10), counted on the CPU: what a GPU-pruned lattice decode
walks beyond the 1-best's trimmed slots, and what that band gives the records.

    python -m benchmarks.lattice_band GRAPH.img SHARD.npz [ROWS [OUTPUT_BEAM [SLACK]]]

ROWS -N takes the N longest rows; SLACK k=K takes each step's slack by the GPU's rule with K u H
of drift a step (common.cuh LatSlackFor; `count(drift_k=)`).

Replays the reference decoder's snapshots of the first ROWS rows (default 3) and, over every real
step that has a next frontier, counts each emitting slot by the GPU's rules (docs/design.md
"Trimmed slots" and "The lattice trim"): `hi`, the slots the 1-best trim keeps (bound > L - beam,
label-0 arcs always); `band`, the ones only the lattice trim adds (bound > (L - beam -
output_beam) - SLACK, default 0.5: the filter's slack is at least its 0.5 pad, so this counts the
smallest band the GPU can walk); of each, `cand` (end >= (cutoff - output_beam) - SLACK: what
ExpandKernel writes as candidates) and `rec` (the destination survives and the arc is admitted or
ends within output_beam + SLACK of the destination's score: the records' filter's rule). L is the
best end over every arc of the best token (the GPU takes its first 64 arcs), so `hi` may be a
little smaller here than on the GPU.

The label bound (`hi_lK`, `band_lK`, K in LABEL_CAPS): the same trims with each token's acoustic
bound taken as the best log-prob over its state's distinct non-blank labels where the state has at
most K of them (else the row's best non-blank, as now): still an upper bound of every arc's end, so
the same records (`lost_lK` counts records outside it: 0), with fewer slots walked. What a per-state
table of K labels would save the scan, MaxKernel and ExpandKernel (docs/speed-notes.md, "Next").
The group bound (`hi_g`, `band_g`, `lost_g`): the labels in 64 groups of consecutive ids, each state
a 64-bit mask of the groups its non-blank labels fall in, each token's bound the best log-prob over
its state's groups (a frame's group maxima computed once): an upper bound too.
The cascade (`hi_cR`, `band_cR`, `lost_cR`, R in CASCADE): states with at most 8 labels take their
own labels' maximum (a table), the others test the frame's R best non-blank labels in order against
a bitmap of their labels and take the first present one's log-prob, else the (R + 1)-th best: an
upper bound with at most R bit tests a token.
The band by label (`band_lab`, `band_lab_groups`, `lost_lab`, `band_lab_tests`, `band_lab_read`): the
band's slots grouped by (token, label), each group's bound its best weight plus its label's log-prob
(the band is never admitted, so a walk of it may take any order); the slots of the groups that reach
the candidates' bound, the groups, the candidates outside them (0), and what a walk that tests the
frame's labels best first against the token's best band weight tests and reads.
The folded cascade (`hi_fB`, `band_fB`, `lost_fB`, B in FOLDS): the GPU's tables (docs/design.md "The
label bound"): R = 2 against heavy states' labels folded into B bits (bit label % B; a collision
only loosens the bound: a label reported present that is not gives the bound of a better label),
light states the row's best non-blank.
"""

import sys
import time

import numpy as np

from benchmarks.roofline import F32, _ragged, emitting_steps, graph_tables
from cuwfst import Decoder, DecoderOptions, Graph


U = 2.0 ** -24
LABEL_CAPS = (1, 2, 4, 8, 1 << 30)  # the label bound's K (1 << 30: every state's own labels)
CASCADE = (1, 2, 4, 8, 16)  # the cascade's R
FOLDS = (512, 256, 128)  # the folded cascade's bits a heavy state (R = 2)
FILTER_MAG, TRIM_MAG, MAX_DRIFT = 8192.0, 7168.0, 2.0  # common.cuh kLatFilterMag, kLatTrimMag, kLatFilterMaxDrift


def gpu_slack(lat_mag: float, drift: float, mag: float, wmax: float, drift_k: float) -> tuple[float, float]:
    """common.cuh LatSlackFor's (drift after the step, slack) with `drift_k` u H a step (the GPU's
    constant), in float64: a count, not the GPU's upward-rounded float32 (within a few ulps)."""
    h = lat_mag + mag + wmax + 1.0
    d = drift + drift_k * U * h
    return d, 2.0 * d + 0.5 + 32.0 * U * h


def run_counts(tot: dict, dst: np.ndarray, se: np.ndarray, cand: np.ndarray, rec: np.ndarray, surv: np.ndarray,
               cutoff, ob, slack) -> None:
    """The running bound (records without a second walk: what ExpandKernel could write as it scores
    each arc, knowing the step's cutoff and its destination's best admitted end so far): the walked
    candidates `cand` in slot order (token-major, each token's arcs best weight first: a sequential
    stand-in for the GPU's parallel order), each written when it is admitted (end > cutoff) or its
    end reaches the best admitted end into its destination before it less output_beam and the slack
    (the records' filter's rule with the running best in place of the final score). `run_writes` the
    writes, `run_surv` those whose destination survives, `run_lost` records not written (0: the final
    score is at least the running best)."""
    n = len(se)
    if n == 0:
        return
    o = np.argsort(dst, kind="stable")
    ds = dst[o]
    es = se[o].astype(np.float32)
    adm = es > cutoff
    fin = es[adm]
    lo = float(fin.min()) if fin.size else 0.0
    K = (float(fin.max()) - lo if fin.size else 0.0) + 4.0
    gid = np.cumsum(np.r_[True, ds[1:] != ds[:-1]]) - 1
    # a segmented running max by the offset trick: group g's values in (g K - 1, g K + K - 4], -inf as g K - 1
    v = gid * K + np.where(adm, es.astype(np.float64) - lo, -1.0)
    cm = np.maximum.accumulate(v)
    prev = np.r_[-np.inf, cm[:-1]]
    pm = prev - gid * K  # (a group's first slot sees the group before's max: pm <= -4)
    best = np.where(pm < -0.5, np.float32(-np.inf), (pm + lo).astype(np.float32))
    with np.errstate(invalid="ignore"):
        near = ~(es < F32(F32(best - ob) - slack))  # (best -inf: every end reaches it)
    wr = np.empty(n, bool)
    wr[o] = adm | near
    wr &= cand
    tot["run_writes"] += int(wr.sum())
    tot["run_surv"] += int((wr & surv).sum())
    tot["run_lost"] += int((rec & cand & ~wr).sum())


def count(g, lp_all: np.ndarray, lens: np.ndarray, rows: int, ob: float = 8.0, slack: float = 0.5,
          log=None, drift_k: float | None = None, row_ids=None) -> dict:
    """The counts over the first `rows` rows (the module's docstring), or over `row_ids`;
    `all_rec`: the records' rule over every slot, which the band and hi must hold between them
    (the trim's exactness). With `drift_k`, each step's slack is the GPU's (LatSlackFor with
    drift_k u H a step, the trim's at kLatFilterMag, the filter and the trim off past their
    magnitudes or lat_drift 2: such a step walks and records every slot, counted in `band` and
    `untrimmed`) instead of the fixed `slack`."""
    ob, slack = F32(ob), F32(slack)
    dec = Decoder(g, DecoderOptions(output_beam=float(ob)), num_threads=1)
    tb = graph_tables(g, dec.eps_iterations)
    eb, ee, w = tb.emit_b, tb.emit_e, tb.weight
    deg_all = ee - eb
    owner, arcs = _ragged(eb, deg_all)
    order = np.lexsort((-w[arcs].astype(np.float64), owner))  # each state's arcs by weight, best first
    arc_sorted = arcs[order]
    nb_sorted_w = np.where(tb.ilabel[arcs] == 0, np.float32(np.inf), w[arcs])[order]
    cum = np.concatenate([[0], np.cumsum(deg_all)])
    wmax = float(np.abs(w[np.isfinite(w)]).max(initial=0.0))
    emaxw = np.full(g.num_states, -np.inf, np.float32)  # each state's best emitting weight (the scan's ub)
    np.maximum.at(emaxw, owner, w[arcs])
    keys = ("tokens", "slots", "hi", "band", "hi_cand", "band_cand", "hi_rec", "band_rec", "all_rec", "adm",
            "cand_adm", "cand_surv", "hi_exact", "band_exact", "weak_dst", "weak_in_arcs", "weak_in_front",
            "weak_in_max",
            "untrimmed", "unfiltered", "steps", "max_known", "max_known_exact", "band_lab", "band_lab_groups",
            "lost_lab", "band_lab_tests", "band_lab_read")
    keys += tuple(f"{x}_l{k}" for k in LABEL_CAPS for x in ("hi", "band", "lost")) + ("hi_g", "band_g", "lost_g")
    # the exact label bound's price: tokens of states with more than 8 labels, and their labels (the
    # log-prob lookups a bitmap per such state would take the scan)
    keys += ("heavy_tokens", "heavy_labels")
    keys += ("run_writes", "run_surv", "run_lost")
    keys += tuple(f"{x}_c{r}" for r in CASCADE for x in ("hi", "band", "lost"))
    keys += tuple(f"{x}_f{b}" for b in FOLDS for x in ("hi", "band", "lost"))
    tot = dict.fromkeys(keys, 0)
    # each state's distinct non-blank labels (the label bound)
    lab_all = tb.ilabel[arcs].astype(np.int64)
    nbm = lab_all > 0
    span = int(lab_all.max(initial=0)) + 1
    nlab = np.bincount(np.unique(owner[nbm].astype(np.int64) * span + lab_all[nbm]) // span,
                       minlength=g.num_states)
    for k in LABEL_CAPS[:-1]:
        tot[f"states_l{k}"] = int(((nlab <= k) & (deg_all > 0)).sum())
    tot["states_emitting"] = int((deg_all > 0).sum())
    # the group bound: 64 groups of consecutive non-blank label ids, each state's mask of them
    gsize = max(1, -(-(span - 1) // 64))
    gmask = np.zeros((g.num_states, 64), bool)
    gmask[owner[nbm], (lab_all[nbm] - 1) // gsize] = True
    # the cascade: a bitmap of labels for each state with more than 8 of them (row = its heavy index)
    heavy_idx = np.full(g.num_states, -1, np.int64)
    hs = np.flatnonzero(nlab > 8)
    heavy_idx[hs] = np.arange(len(hs))
    hmask = np.zeros((len(hs), max(span, lp_all.shape[-1])), bool)  # (the log-probs' columns)
    hm = nbm & (heavy_idx[owner] >= 0)
    hmask[heavy_idx[owner[hm]], lab_all[hm]] = True
    # the folded bitmaps (the GPU's tables): bit label % b of b bits a heavy state
    fmask = {b: np.zeros((len(hs), b), bool) for b in FOLDS}
    for b, fm in fmask.items():
        fm[heavy_idx[owner[hm]], lab_all[hm] % b] = True
    pos_of = np.full(g.num_states, -1, np.int64)
    # the destination side: each state's incoming emitting arcs (the graph reversed), for the weak
    # survivors (a new token within output_beam + slack of the cutoff: the only ones a non-admitted
    # arc can be recorded into, since a record's end >= s(dst) - output_beam - slack and end <= cutoff)
    in_deg = np.bincount(tb.dest[arcs], minlength=g.num_states)
    in_front = np.zeros(g.num_states, bool)
    src_of = owner  # (each arc's source state, as arcs)
    rev = arcs[np.argsort(tb.dest[arcs], kind="stable")]
    rev_src = np.empty(g.num_states + 1, np.int64)
    rev_src[0] = 0
    np.cumsum(in_deg, out=rev_src[1:])
    src_state_of_arc = np.empty(int(tb.dest.shape[0]), np.int64)
    src_state_of_arc[arcs] = src_of
    t0 = time.time()
    for i in (range(rows) if row_ids is None else row_ids):
        T, lp_row = int(lens[i]), lp_all[i]
        steps = list(emitting_steps(tb, dec, lp_row, T))
        lat_mag, drift = 0.0, 0.0
        for (k, s, sc, beam, cutoff, deg, own, a, lp, end), nxt in zip(steps, steps[1:]):
            if nxt[0] != k + 1:
                continue
            s2, sc2 = nxt[1], nxt[2]
            trim_on = filt_on = True
            step_slack = trim_slack = slack
            if drift_k is not None:
                mx = float(sc2.max())
                mag = max(abs(mx), abs(mx - float(beam)))
                d8, trim_slack = gpu_slack(lat_mag, drift, FILTER_MAG, wmax, drift_k)
                trim_on = lat_mag <= TRIM_MAG and d8 <= MAX_DRIFT
                drift, step_slack = gpu_slack(lat_mag, drift, mag, wmax, drift_k)
                filt_on = mag <= FILTER_MAG and drift <= MAX_DRIFT
                lat_mag = mag
                step_slack, trim_slack = F32(step_slack), F32(trim_slack)
            has = deg > 0
            bt = np.flatnonzero(has)[np.argmax(sc[has])]
            L = end[own == bt].max()
            # max_known: the step's upper bound max(ub + max_lp) over the tokens is at most the GPU's
            # anchor (the best-scoring token, the largest index among ties; the best end over its first
            # 64 sorted arcs): M = the anchor, known after the scan (docs/speed-notes.md, "Next for the max")
            idx = np.flatnonzero(has)
            anc = idx[sc[idx] == sc[idx].max()].max()
            sa64 = arc_sorted[cum[s[anc]] : min(cum[s[anc] + 1], cum[s[anc]] + 64)]
            anchor = ((sc[anc] + w[sa64]) + lp[tb.ilabel[sa64]]).max()
            known = ((sc[idx] + emaxw[s[idx]]) + lp.max()).max() <= anchor
            tot["max_known"] += int(known)
            tot["max_known_exact"] += int(known and end.max() == anchor)  # (the claim, checked: M is the anchor)
            tot["steps"] += 1
            # the slots in each token's sorted order, their arcs and bounds (the GPU's rule)
            posw = np.arange(len(a)) - np.repeat(np.cumsum(deg) - deg, deg)
            at = cum[s][own] + posw
            sa = arc_sorted[at]
            nbw = nb_sorted_w[at]
            ub = np.where(np.isinf(nbw), np.float32(np.inf), (sc[own] + nbw) + lp[1:].max())
            se = (sc[own] + w[sa]) + lp[tb.ilabel[sa]]  # each sorted slot's end
            low = F32(L - beam)
            hi = ub > low
            band = ~hi & (ub > F32(F32(low - ob) - trim_slack)) if trim_on else ~hi
            cand = se >= F32(F32(cutoff - ob) - step_slack)
            pos_of[s2] = np.arange(len(s2))
            p = pos_of[tb.dest[sa]]
            surv = p >= 0
            sdst = np.where(surv, sc2[np.maximum(p, 0)], np.float32(-np.inf))
            rec = surv & ((se > cutoff) | ~(se < F32(F32(sdst - ob) - step_slack))) if filt_on else surv
            pos_of[s2] = -1
            run_counts(tot, tb.dest[sa], se, cand & (hi | band), rec, surv, cutoff, ob, step_slack)
            for name, m in (("hi", hi), ("band", band)):
                tot[name] += int(m.sum())
                tot[name + "_cand"] += int((m & cand).sum())
                tot[name + "_rec"] += int((m & rec).sum())
            tot["all_rec"] += int(rec.sum())
            weak = s2[sc2 <= F32(F32(cutoff + ob) + step_slack)]
            tot["weak_dst"] += int(len(weak))
            tot["weak_in_arcs"] += int(in_deg[weak].sum())
            tot["weak_in_max"] = max(tot["weak_in_max"], int(in_deg[weak].max(initial=0)))
            if len(weak):
                _, ins = _ragged(rev_src[weak], in_deg[weak])
                in_front[s] = True
                tot["weak_in_front"] += int(in_front[src_state_of_arc[rev[ins]]].sum())
                in_front[s] = False
            walked = hi | band
            # the band walked by label (never admitted: its order and layout are free): the band's
            # slots grouped by (token, label), each group's bound its best weight plus its label's
            # log-prob; `band_lab` the slots of the groups that reach the candidates' bound,
            # `band_lab_groups` the groups (a walk's headers), `lost_lab` candidates outside them (0)
            if band.any():
                labs_b, bo, wb = tb.ilabel[sa][band], own[band], w[sa][band]
                gk = bo.astype(np.int64) * (int(tb.ilabel.max()) + 1) + labs_b
                uq, first, gi = np.unique(gk, return_index=True, return_inverse=True)
                gw = np.full(len(uq), -np.inf, np.float32)
                np.maximum.at(gw, gi, wb)
                g_ok = (sc[bo[first]] + gw) + lp[labs_b[first]] >= F32(F32(cutoff - ob) - step_slack)
                tot["band_lab"] += int(g_ok[gi].sum())
                tot["band_lab_groups"] += len(uq)
                tot["lost_lab"] += int((cand[band] & ~g_ok[gi]).sum())
                # reaching them by the frame's labels best first: a token tests labels in the frame's
                # order until its best band weight plus the next label's log-prob cannot reach the
                # bound (`band_lab_tests`: the tests, a bitmap lookup each, the failing one too), and
                # reads the band slots of every tested label its state has (`band_lab_read`)
                bow = np.full(len(s), -np.inf, np.float32)
                np.maximum.at(bow, bo, wb)
                toks = np.unique(bo)
                need = F32(F32(cutoff - ob) - step_slack) - (sc[toks] + bow[toks])  # a label passes iff lp >= need
                desc = -np.sort(-lp[1:])
                tot["band_lab_tests"] += int(np.minimum(np.searchsorted(-desc, -need, side="right") + 1,
                                                        len(desc)).sum())
                need_of = np.full(len(s), np.inf, np.float32)
                need_of[toks] = need
                tot["band_lab_read"] += int((lp[labs_b] >= need_of[bo]).sum())
            # the same two trims from the step's exact max M instead of the anchor L (what a scan that knew
            # M would walk): how much of the band is the gap between L and M
            low_m = F32(F32(end.max()) - beam)
            hi_m = ub > low_m
            band_m = ~hi_m & (ub > F32(F32(low_m - ob) - trim_slack)) if trim_on else ~hi_m
            # the label bound: each token's best log-prob over its own non-blank slots' labels (the slots
            # are grouped by token, in order), taken where its state has at most K distinct labels
            labs = tb.ilabel[sa]
            acs = np.where(labs > 0, lp[np.maximum(labs, 0)], np.float32(-np.inf)).astype(np.float32)
            starts = np.flatnonzero(deg > 0)
            tok_ac = np.full(len(s), -np.inf, np.float32)
            if len(starts):
                tok_ac[starts] = np.maximum.reduceat(acs, (np.cumsum(deg) - deg)[starts])
            row_ac = np.float32(lp[1:].max())
            heavy = nlab[s] > 8
            tot["heavy_tokens"] += int(heavy.sum())
            tot["heavy_labels"] += int(nlab[s][heavy].sum())
            ranked = 1 + np.argsort(-lp[1:], kind="stable")  # the frame's non-blank labels, best first
            hrow = heavy_idx[s]
            def bound_counts(suffix, ac_tok):
                # the trims with each token's acoustic bound ac_tok: hi, band and records outside them
                with np.errstate(invalid="ignore"):  # (blank slots: inf + -inf, replaced by inf)
                    ub_x = np.where(np.isinf(nbw), np.float32(np.inf), (sc[own] + nbw) + ac_tok[own])
                hi_x = ub_x > low
                band_x = ~hi_x & (ub_x > F32(F32(low - ob) - trim_slack)) if trim_on else ~hi_x
                tot[f"hi_{suffix}"] += int(hi_x.sum())
                tot[f"band_{suffix}"] += int(band_x.sum())
                tot[f"lost_{suffix}"] += int((rec & ~(hi_x | band_x)).sum()) if trim_on else 0

            def cascade(r, test, light):
                # the cascade over the frame's r best labels, test(j, rows) whether the heavy tokens of
                # bitmap rows `rows` hold label ranked[j] (or may: a folded bitmap), `light` the light
                # tokens' bound. A heavy token none of whose labels is among the top r takes the
                # (r + 1)-th best (with fewer labels in the frame than that, every label was tested: its
                # own maximum); else the best present label among the top r wins.
                miss = np.float32(lp[ranked[r]]) if r < len(ranked) else tok_ac
                ac_c = np.where(heavy, miss, light).astype(np.float32)
                for j in range(min(r, len(ranked)) - 1, -1, -1):
                    present = heavy.copy()
                    present[present] = test(j, hrow[present])
                    ac_c = np.where(present, np.float32(lp[ranked[j]]), ac_c)
                return ac_c

            for b in FOLDS:  # the GPU's rule: R = 2 on folded bitmaps, light states the row's best
                bound_counts(f"f{b}", cascade(2, lambda j, h, b=b: fmask[b][h, ranked[j] % b], row_ac))
            for r in CASCADE:  # exact bitmaps, light states their own labels' maximum
                bound_counts(f"c{r}", cascade(r, lambda j, h: hmask[h, ranked[j]], tok_ac))
            for kc in LABEL_CAPS:
                bound_counts(f"l{kc}", np.where(nlab[s] <= kc, tok_ac, row_ac))
            gmax = np.full(64, -np.inf, np.float32)  # the frame's best log-prob in each group
            np.maximum.at(gmax, (np.arange(1, len(lp)) - 1) // gsize, lp[1:].astype(np.float32))
            bound_counts("g", np.where(gmask[s], gmax[None, :], np.float32(-np.inf)).max(axis=1))
            tot["hi_exact"] += int(hi_m.sum())
            tot["band_exact"] += int(band_m.sum())
            tot["cand_adm"] += int((walked & cand & (se > cutoff)).sum())  # candidates ExpandKernel admits
            tot["cand_surv"] += int((walked & cand & surv).sum())  # candidates whose destination survives
            tot["adm"] += int((end > cutoff).sum())
            tot["untrimmed"] += 0 if trim_on else 1
            tot["unfiltered"] += 0 if filt_on else 1
            tot["slots"] += len(a)
            tot["tokens"] += len(s)
        if log:
            log(f"{i} {T} {tot} {time.time() - t0:.0f} s")
    return tot


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    g = Graph.load(argv[0])
    z = np.load(argv[1])
    n = int(argv[2]) if len(argv) > 2 else 3
    sl = argv[4] if len(argv) > 4 else "0.5"
    # SLACK "k=16": the GPU's per-step slack with 16 u H of drift a step; ROWS "-3": the 3 longest rows
    drift_k = float(sl[2:]) if sl.startswith("k=") else None
    row_ids = None if n > 0 else [int(r) for r in np.argsort(-z["lengths"], kind="stable")[:-n]]
    tot = count(g, z["log_probs"], z["lengths"], n, float(argv[3]) if len(argv) > 3 else 8.0,
                0.5 if drift_k is not None else float(sl), log=lambda m: print(m, flush=True),
                drift_k=drift_k, row_ids=row_ids)
    print({k: f"{v / max(tot['slots'], 1):.4f}" for k, v in tot.items()})
    print(f"the band by label: {tot['band_lab']} of its {tot['band']} slots in (token, label) groups that reach the "
          f"candidates' bound, {tot['band_lab_groups']} groups, {tot['lost_lab']} candidates outside them; by the "
          f"frame's labels best first: {tot['band_lab_tests']} label tests, {tot['band_lab_read']} band slots read")
    print(f"band / hi slots {tot['band'] / max(tot['hi'], 1):.3f}; band candidates / band slots "
          f"{tot['band_cand'] / max(tot['band'], 1):.3f}; band records / band slots {tot['band_rec'] / max(tot['band'], 1):.4f}; "
          f"band records / all records {tot['band_rec'] / max(tot['band_rec'] + tot['hi_rec'], 1):.3f}; "
          f"steps whose max the anchor already is {tot['max_known']} of {tot['steps']}")
    print(f"from the exact max instead of the anchor: hi {tot['hi_exact']} (anchor {tot['hi']}), band "
          f"{tot['band_exact']} (anchor {tot['band']})")
    for kc in LABEL_CAPS:
        name = "every state's own labels" if kc == LABEL_CAPS[-1] else \
            f"states with at most {kc} labels ({tot[f'states_l{kc}']} of {tot['states_emitting']} emitting states)"
        print(f"label bound, {name}: hi {tot[f'hi_l{kc}']} (now {tot['hi']}), band {tot[f'band_l{kc}']} "
              f"(now {tot['band']}), records outside {tot[f'lost_l{kc}']}")
    for r in CASCADE:
        print(f"cascade, the frame's {r} best labels tested against heavy states' bitmaps: hi {tot[f'hi_c{r}']} "
              f"(now {tot['hi']}), band {tot[f'band_c{r}']} (now {tot['band']}), records outside {tot[f'lost_c{r}']}")
    for b in FOLDS:
        print(f"the GPU's cascade (R = 2, heavy states' labels folded into {b} bits, light states the row's "
              f"best): hi {tot[f'hi_f{b}']} (now {tot['hi']}), band {tot[f'band_f{b}']} (now {tot['band']}), "
              f"records outside {tot[f'lost_f{b}']}")
    print(f"the exact label bound's price: {tot['heavy_tokens']} tokens of states with more than 8 labels, "
          f"{tot['heavy_labels']} labels among them (of {tot['tokens']} tokens in all)")
    print(f"group bound (64 groups of consecutive labels, a mask a state): hi {tot['hi_g']} (now {tot['hi']}), band "
          f"{tot['band_g']} (now {tot['band']}), records outside {tot['lost_g']}")
    print(f"the destination side: {tot['weak_dst']} weak survivors (within output_beam + slack of the cutoff), "
          f"{tot['weak_in_arcs']} incoming arcs (largest in-degree {tot['weak_in_max']}), {tot['weak_in_front']} of "
          f"them from a state of the frontier; the band's slots {tot['band']}")
    print(f"the running bound (no second walk): {tot['run_writes']} writes, {tot['run_surv']} into surviving "
          f"destinations, {tot['run_lost']} records missed, against {tot['hi_rec'] + tot['band_rec']} records")
    c = tot["hi_cand"] + tot["band_cand"]
    print(f"candidates {c}: admitted {tot['cand_adm']}, destination survives {tot['cand_surv']}, records "
          f"{tot['hi_rec'] + tot['band_rec']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
