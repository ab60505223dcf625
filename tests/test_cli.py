"""The command line on the tiny graph: every input kind and output format against the
Python API's results, WER against kaldialign, and each user mistake of issue 12 as a
clear one-line error."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest_data import make_dataset
from cuwfst import Decoder, Graph
from cuwfst.cli import main
from test_graph_image import TEXT


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    pytest.importorskip("kaldiio")
    return make_dataset(tmp_path_factory.mktemp("ds"))


@pytest.fixture(scope="module")
def ds_npz(tmp_path_factory):
    """The dataset without its Kaldi ark (for tests that read only the .npz: the GPU machine
    has no kaldiio, and the GPU test must not be skipped there for it)."""
    return make_dataset(tmp_path_factory.mktemp("ds_npz"), kaldi=False)


@pytest.fixture(scope="module")
def api(ds):
    """The Python API's results on the same utterances: {id: Hypothesis}."""
    g = Graph.open(ds["lang"] / "HLG.fst")
    hyps = Decoder(g).decode(ds["lp"], ds["lens"])
    return g, dict(zip(ds["ids"], hyps))


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_export_info_decode(tmp_path, capsys):
    txt = tmp_path / "g.txt"
    txt.write_text(TEXT)
    img = tmp_path / "g.img"
    assert main(["export", "--k2-text", str(txt), "--out", str(img)]) == 0
    assert main(["info", str(img)]) == 0
    out = capsys.readouterr().out
    assert "states         4" in out and "arcs           6" in out and "epsilon arcs   0" in out
    lp = np.log(np.full((2, 3, 3), 1 / 3, np.float32))
    np.savez(tmp_path / "u.npz", log_probs=lp, lengths=np.array([3, 2]))
    assert main(["decode", str(img), str(tmp_path / "u.npz")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == ["u-0", "u-1"]


def test_info_prints_real_flag_values(capsys):
    from conftest_data import TINY
    rc, out, _ = run(capsys, "info", TINY / "TLG.img")
    assert rc == 0 and "eps-first=1" in out and "has-eps=1" in out and "{" not in out
    rc, out, _ = run(capsys, "info", TINY / "HLG.img")
    assert rc == 0 and "eps-first=0" in out and "word table     none" in out


def test_corrupt_image_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.img"
    bad.write_bytes(b"not an image" * 40)
    assert main(["info", str(bad)]) == 2
    assert "corrupt graph image" in capsys.readouterr().err


def test_demo_runs_on_cpu(capsys):
    assert main(["demo", "--device", "cpu", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    wer = [ln for ln in out.splitlines() if ln.startswith("WER:")][0]
    greedy, hlg = (float(x.split()[-1].rstrip("%")) for x in wer[4:].split(","))
    assert hlg < greedy  # the graph fixes most of the simulated misspellings


def test_version_help_and_python_m(capsys):
    import cuwfst
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"cuwfst {cuwfst.__version__}"
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "(default: 16)" in help_text and "(default: 0.04)" in help_text and "(default: auto)" in help_text
    r = subprocess.run([sys.executable, "-m", "cuwfst", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"cuwfst {cuwfst.__version__}"


# ---------------------------------------------------------------------- inputs and outputs
@pytest.mark.parametrize("kind", ["npz", "npy-dir", "npy-glob", "scp", "ark", "pt-dir"])
def test_every_input_kind_gives_the_api_results(ds, api, capsys, kind, tmp_path):
    root = ds["root"]
    if kind == "pt-dir":
        torch = pytest.importorskip("torch")
        for i, u in enumerate(ds["ids"]):
            torch.save(torch.from_numpy(ds["lp"][i, : ds["lens"][i]].astype(np.float32)), tmp_path / f"{u}.pt")
    inp = {"npz": root / "utts.npz", "npy-dir": root / "npy", "npy-glob": f"{root}/npy/utt*.npy",
           "scp": f"scp:{root / 'utts.scp'}", "ark": root / "utts.ark", "pt-dir": tmp_path}[kind]
    rc, out, err = run(capsys, "decode", ds["lang"] / "HLG.fst", inp, "--batch-size", 3)
    assert rc == 0, err
    got = {ln.split()[0]: ln.split()[1:] for ln in out.strip().splitlines()}
    _, hyps = api
    assert got == {u: h.word_symbols for u, h in hyps.items()}
    assert "8 utterances" in err and "overflow 0" in err


def test_jsonl_fields_and_times(ds, api, capsys):
    g, hyps = api
    rc, out, err = run(capsys, "decode", ds["lang"] / "HLG.fst", ds["root"] / "utts.npz", "--format", "jsonl")
    assert rc == 0, err
    recs = [json.loads(ln) for ln in out.strip().splitlines()]
    assert [r["id"] for r in recs] == ds["ids"]
    for r, n in zip(recs, ds["lens"]):
        h = hyps[r["id"]]
        assert r["word_ids"] == h.words and r["text"] == h.text and r["score"] == pytest.approx(h.score)
        assert r["reached_final"] == h.reached_final and r["overflow"] == 0 and r["num_frames"] == n
        assert r["token_symbols"] == [g.tokens[t] for t in r["tokens"]] and 0 not in r["tokens"]
        assert len(r["word_start"]) == len(r["words"]) == len(r["word_end"])
        for i, (s, e) in enumerate(zip(r["word_start"], r["word_end"])):
            f = round(s / 0.04)
            assert s < e <= n * 0.04 + 1e-9
            assert f >= h.timestamps[i] and h.tokens[f] != 0  # the word starts on a non-blank frame
        assert r["word_start"] == sorted(r["word_start"])
    # times scale with the frame shift
    rc, out3, _ = run(capsys, "decode", ds["lang"] / "HLG.fst", ds["root"] / "utts.npz", "--format", "jsonl",
                      "--frame-shift", "0.03")
    r3 = json.loads(out3.splitlines()[0])
    assert r3["word_start"] == pytest.approx([s * 0.75 for s in recs[0]["word_start"]], abs=1e-3)


def test_ctm_matches_jsonl(ds, capsys, tmp_path):
    args = ("decode", ds["lang"] / "HLG.fst", ds["root"] / "npy")
    rc, out, _ = run(capsys, *args, "--format", "jsonl")
    recs = [json.loads(ln) for ln in out.strip().splitlines()]
    rc, _, err = run(capsys, *args, "--format", "ctm", "--out", tmp_path / "o.ctm")
    assert rc == 0, err
    lines = (tmp_path / "o.ctm").read_text().splitlines()
    expect = [f"{r['id']} 1 {s:.2f} {e - s:.2f} {w}" for r in recs
              for w, s, e in zip(r["words"], r["word_start"], r["word_end"])]
    assert lines == expect and len(lines) == sum(len(r["words"]) for r in recs)


def test_refs_wer_and_reports(ds, api, capsys, tmp_path):
    from kaldialign import edit_distance
    _, hyps = api
    refs = dict(zip(ds["ids"], ds["refs"]))
    errs = sum(edit_distance(refs[u].split(), h.word_symbols)["total"] for u, h in hyps.items())
    nref = sum(len(t.split()) for t in refs.values())
    rc, _, err = run(capsys, "decode", ds["lang"] / "HLG.fst", ds["root"] / "npy", "--refs", ds["root"] / "refs.txt",
                     "--out", tmp_path / "hyp.txt")
    assert rc == 0, err
    assert f"%WER {100 * errs / nref:.2f}% [ {errs} / {nref}," in err
    recogs = (tmp_path / "recogs-hyp.txt").read_text()
    assert f"utt0:\tref={refs['utt0'].split()}" in recogs
    report = (tmp_path / "errs-hyp.txt").read_text()
    assert report.startswith(f"%WER {100 * errs / nref:.2f}%") and "PER-WORD STATS" in report


def test_nbest_and_confidences_from_lattices(ds, api, capsys):
    """--format nbest: the lattice's n best word sequences (`id-k score words`); --confidences:
    CTM's sixth column and JSONL's word_conf are the Python API's word confidences."""
    g, _ = api
    hyps = dict(zip(ds["ids"], Decoder(g).decode(ds["lp"], ds["lens"], lattice=True)))
    rc, out, err = run(capsys, "decode", ds["root"] / "HLG.img", ds["root"] / "utts.npz", "--format", "nbest",
                       "--nbest", "3", "--device", "cpu", "--words", ds["lang"] / "words.txt")
    assert rc == 0, err
    lines = out.splitlines()
    for utt, h in hyps.items():
        want = [(f"{utt}-{k}", f"{b.score:.4f}", [g.words[w] for w in b.words])
                for k, b in enumerate(h.lattice.nbest(3), 1)]
        got = [(x.split()[0], x.split()[1], x.split()[2:]) for x in lines if x.split()[0].rsplit("-", 1)[0] == utt]
        assert got == want, utt
        if h.words:  # the best sequence is the 1-best's words
            assert got[0][2] == h.word_symbols
    rc, out, err = run(capsys, "decode", ds["root"] / "HLG.img", ds["root"] / "utts.npz", "--format", "ctm",
                       "--confidences", "--device", "cpu")
    assert rc == 0, err
    by_utt = {}
    for x in out.splitlines():
        f = x.split()
        by_utt.setdefault(f[0], []).append(float(f[5]))
    for utt, h in hyps.items():
        assert by_utt.get(utt, []) == [round(round(c, 4), 4) for c in h.word_confidences], utt
    rc, out, err = run(capsys, "decode", ds["root"] / "HLG.img", ds["root"] / "utts.npz", "--format", "jsonl",
                       "--confidences", "--device", "cpu")
    assert rc == 0, err
    import json

    first = json.loads(out.splitlines()[0])
    assert first["word_conf"] == [round(c, 4) for c in hyps[first["id"]].word_confidences]
    rc, _, err = run(capsys, "decode", ds["root"] / "HLG.img", ds["root"] / "utts.npz", "--format", "nbest",
                     "--nbest", "0")
    assert rc == 2 and "--nbest must be >= 1" in err


@pytest.mark.gpu
def test_lattice_outputs_on_the_gpu_equal_the_cpus(ds_npz, capsys):
    """--format nbest and --confidences on --device cuda: the GPU's lattices are the CPU's, so
    the n-best lists, CTM confidences and JSONL word_conf are the same text."""
    for fmt in (["--format", "nbest", "--nbest", "3"], ["--format", "ctm", "--confidences"],
                ["--format", "jsonl", "--confidences"]):
        got = {}
        for dev in ("cpu", "cuda"):
            rc, out, err = run(capsys, "decode", ds_npz["root"] / "HLG.img", ds_npz["root"] / "utts.npz", *fmt,
                               "--device", dev)
            assert rc == 0, err
            got[dev] = out
        assert got["cuda"] == got["cpu"] and got["cpu"].strip(), fmt


def test_memory_option(ds_npz, capsys):
    """--memory passes Decoder's memory= (the results do not depend on it: the same text on the
    CPU, where it is only checked); a mode that does not exist is argparse's usage error."""
    args = ("decode", ds_npz["root"] / "HLG.img", ds_npz["root"] / "utts.npz", "--format", "jsonl", "--device", "cpu")
    rc, base, err = run(capsys, *args)
    assert rc == 0, err
    for mode in ("lazy", "pooled", "eager"):
        rc, out, err = run(capsys, *args, "--memory", mode)
        assert rc == 0 and out == base and base.strip(), (mode, err)
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args] + ["--memory", "tiny"])
    assert e.value.code == 2 and "--memory" in capsys.readouterr().err


@pytest.mark.gpu
def test_memory_option_on_the_gpu(ds_npz, capsys):
    """--memory pooled and eager on --device cuda: the CPU's text (1-best and, with
    --confidences, the lattices' confidences)."""
    for fmt in (["--format", "jsonl"], ["--format", "ctm", "--confidences"]):
        base = ("decode", ds_npz["root"] / "HLG.img", ds_npz["root"] / "utts.npz", *fmt)
        rc, cpu, err = run(capsys, *base, "--device", "cpu")
        assert rc == 0 and cpu.strip(), err
        for mode in ("pooled", "eager"):
            rc, out, err = run(capsys, *base, "--device", "cuda", "--memory", mode)
            assert rc == 0 and out == cpu, (fmt, mode, err)


def test_image_with_words_option(ds, api, capsys):
    rc, out, err = run(capsys, "decode", ds["root"] / "HLG.img", ds["root"] / "utts.npz",
                       "--words", ds["lang"] / "words.txt")
    assert rc == 0, err
    _, hyps = api
    assert out.splitlines()[0].split()[1:] == hyps["utt0"].word_symbols


def test_closed_pipe_prints_no_traceback(ds, tmp_path):
    # 80 utterances of JSON (about 240 KB): more than a pipe holds, so writes hit the closed pipe
    reps = 10
    np.savez(tmp_path / "many.npz", log_probs=np.concatenate([ds["lp"]] * reps), lengths=np.tile(ds["lens"], reps))
    cmd = (f"{sys.executable} -m cuwfst decode {ds['root'] / 'HLG.img'} {tmp_path / 'many.npz'} --format jsonl "
           f"| head -n 1; echo status=${{PIPESTATUS[0]}} >&2")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    assert r.stdout.startswith('{"id": "many-0"') and len(r.stdout.splitlines()) == 1
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr
    assert "status=141" in r.stderr  # the reader went away: SIGPIPE's status, quietly


# ---------------------------------------------------------------------- user mistakes (issue 12)
def one_line_error(rc, err, *needles):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("cuwfst ") and ": error: " in lines[-1]
    for n in needles:
        assert n in lines[-1], lines[-1]


def test_wrong_token_offset(ds, capsys, tmp_path):
    lang = ds["lang"]
    rc, _, err = run(capsys, "export", "--openfst", lang / "HLG.fst", "--token-offset", 0, "--lang-dir", lang,
                     "--out", tmp_path / "x.img")
    one_line_error(rc, err, "token 0", "--token-offset")
    rc, _, err = run(capsys, "export", "--openfst", lang / "HLG.fst", "--token-offset", 2, "--out", tmp_path / "x.img")
    one_line_error(rc, err, "--token-offset")
    # without a token table the export warns, and the decode refuses the width mismatch
    rc, _, err = run(capsys, "export", "--openfst", lang / "HLG.fst", "--token-offset", 0, "--out", tmp_path / "x.img")
    assert rc == 0 and "warning: no arc reads token 0" in err
    rc, _, err = run(capsys, "decode", tmp_path / "x.img", ds["root"] / "utts.npz")
    one_line_error(rc, err, "columns", "--token-offset")


def test_tokens_txt_as_words(ds, capsys, tmp_path):
    rc, _, err = run(capsys, "export", "--openfst", ds["lang"] / "HLG.fst", "--words", ds["lang"] / "tokens.txt",
                     "--out", tmp_path / "x.img")
    one_line_error(rc, err, "looks like a token table", "--tokens")
    rc, _, err = run(capsys, "decode", ds["root"] / "HLG.img", ds["root"] / "utts.npz", "--words", ds["lang"] / "tokens.txt")
    one_line_error(rc, err, "looks like a token table")


def test_words_txt_with_missing_entries(ds, capsys, tmp_path):
    lines = (ds["lang"] / "words.txt").read_text().splitlines()
    short = tmp_path / "words.txt"
    short.write_text("\n".join(lines[:200]) + "\n")
    rc, _, err = run(capsys, "export", "--openfst", ds["lang"] / "HLG.fst", "--words", short, "--out", tmp_path / "x.img")
    one_line_error(rc, err, "not in the word table")


def test_log_probs_wider_than_vocab(ds, api, capsys, tmp_path):
    lp = np.concatenate([ds["lp"], np.full(ds["lp"].shape[:2] + (1,), -30, np.float16)], axis=2)
    np.savez(tmp_path / "wide.npz", log_probs=lp, lengths=ds["lens"], ids=np.array(ds["ids"]))
    rc, _, err = run(capsys, "decode", ds["root"] / "HLG.img", tmp_path / "wide.npz")
    one_line_error(rc, err, "502 columns", "--allow-extra-columns")
    rc, out, err = run(capsys, "decode", ds["lang"] / "HLG.fst", tmp_path / "wide.npz", "--allow-extra-columns")
    assert rc == 0, err
    assert out.splitlines()[0].split()[1:] == api[1]["utt0"].word_symbols


def test_probabilities_or_logits_instead_of_log_probs(ds, api, capsys, tmp_path):
    lp32 = ds["lp"].astype(np.float32)
    np.savez(tmp_path / "p.npz", log_probs=np.exp(lp32), lengths=ds["lens"], ids=np.array(ds["ids"]))
    rc, _, err = run(capsys, "decode", ds["root"] / "HLG.img", tmp_path / "p.npz")
    one_line_error(rc, err, "not log-probabilities", "probabilities", "log")
    logits = lp32 * 0.5 + 3.0  # softmax(logits) differs from exp(lp): a real model's logits
    np.savez(tmp_path / "l.npz", log_probs=logits, lengths=ds["lens"], ids=np.array(ds["ids"]))
    rc, _, err = run(capsys, "decode", ds["root"] / "HLG.img", tmp_path / "l.npz")
    one_line_error(rc, err, "logits", "--log-softmax")
    # --log-softmax of shifted log-probs gives back the log-probs: the API's words
    np.savez(tmp_path / "s.npz", log_probs=lp32 + 3.0, lengths=ds["lens"], ids=np.array(ds["ids"]))
    rc, out, err = run(capsys, "decode", ds["lang"] / "HLG.fst", tmp_path / "s.npz", "--log-softmax")
    assert rc == 0, err
    assert out.splitlines()[0].split()[1:] == api[1]["utt0"].word_symbols


def test_export_openfst_on_a_non_fst_file(ds, capsys, tmp_path):
    rc, _, err = run(capsys, "export", "--openfst", ds["lang"] / "words.txt", "--out", tmp_path / "x.img")
    one_line_error(rc, err, "not an OpenFst binary graph", "symbol table")
    junk = tmp_path / "junk.fst"
    junk.write_bytes(os.urandom(300))
    rc, _, err = run(capsys, "export", "--openfst", junk, "--out", tmp_path / "x.img")
    one_line_error(rc, err, "not an OpenFst binary graph")


def test_empty_batch(ds, capsys, tmp_path):
    with pytest.raises(ValueError, match="empty batch"):
        Decoder(Graph.load(ds["root"] / "HLG.img")).decode(np.zeros((0, 5, 501), np.float32))
    np.savez(tmp_path / "empty.npz", log_probs=np.zeros((0, 5, 501), np.float32), lengths=np.zeros(0, np.int32))
    rc, _, err = run(capsys, "decode", ds["root"] / "HLG.img", tmp_path / "empty.npz")
    one_line_error(rc, err, "no utterance")


def test_a_fst_where_an_image_is_expected(ds, capsys):
    rc, _, err = run(capsys, "info", ds["lang"] / "TLG.fst")
    one_line_error(rc, err, "is an OpenFst graph", "cuwfst export --openfst")
    with pytest.raises(ValueError, match="cuwfst export --openfst"):
        Graph.load(ds["lang"] / "TLG.fst")
    rc, _, err = run(capsys, "info", ds["lang"] / "words.txt")
    one_line_error(rc, err, "symbol table")


def test_debug_shows_the_traceback(ds):
    from cuwfst.graph import WrongFileType
    with pytest.raises(WrongFileType):
        main(["--debug", "info", str(ds["lang"] / "TLG.fst")])
    with pytest.raises(WrongFileType):
        main(["info", str(ds["lang"] / "TLG.fst"), "--debug"])


def test_bfloat16_inputs(ds, api, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    lp = torch.from_numpy(ds["lp"][:2].astype(np.float32)).bfloat16()
    g = api[0]
    got = Decoder(g).decode(lp, ds["lens"][:2])
    want = Decoder(g).decode(lp.float().numpy(), ds["lens"][:2])
    assert [(h.words, h.score) for h in got] == [(h.words, h.score) for h in want]
    torch.save(lp[0, : ds["lens"][0]].clone(), tmp_path / "utt0.pt")
    rc, out, err = run(capsys, "decode", ds["lang"] / "HLG.fst", tmp_path)
    assert rc == 0, err
    assert out.split()[1:] == want[0].word_symbols
