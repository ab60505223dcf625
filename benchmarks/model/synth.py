"""Synthetic speech in parallel: transcripts -> espeak-ng audio -> augmentation -> fbank.

    python -m benchmarks.model.synth --corpus DIR --num 200 [--split train] [--workers 16] [--wav-dir D]

(The command measures the speed: utterances and audio seconds per wall second.)

Work goes out in chunks of CHUNK consecutive rows, each chunk to a freshly spawned process:
espeak-ng carries hidden state from one utterance to the next (its pitch flutter and noise
generators are neither reset by espeak_Terminate nor seedable from outside), so a row's
audio is reproducible only when the rows before it in its process are the same. A fresh
process per chunk makes row i depend on (seed, split, i) and the chunk's earlier rows only,
never on the number of workers or on scheduling. `spawn` also keeps the workers free of
the parent's torch and CUDA state.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .audio import CLEAN, TEST_AUGMENT, TRAIN_AUGMENT, Augment, augment, fbank, pick_voice, write_wav
from .sentences import SPLITS

CHUNK = 128  # rows per worker process; part of what defines a row's audio (see above)


@dataclass
class Row:
    """One synthesized utterance."""

    split: str
    index: int
    words: list[str]
    feats: np.ndarray  # [frames, 80] float16 log-mel
    num_samples: int  # at 16 kHz, after speed perturbation
    voice: dict
    speed: float
    audio: np.ndarray | None = field(default=None, repr=False)  # float32 16 kHz, when asked for

    @property
    def seconds(self) -> float:
        return self.num_samples / 16000.0


@dataclass(frozen=True)
class ChunkJob:
    corpus: str  # the tier whose LM gives the sentences
    split: str
    seed: int
    held_out_voices: bool
    augment: Augment
    indices: tuple  # rows of the split, one chunk's worth
    keep_audio: bool = False


def synth_chunk(job: ChunkJob) -> list[Row]:
    """Runs in a fresh worker process (see the module doc): draws its rows' sentences, speaks
    them, augments, computes fbank."""
    from .espeak import Espeak
    from .sentences import SentenceSource

    source = SentenceSource(job.corpus, seed=job.seed)
    engine = Espeak.get()
    out = []
    for index in job.indices:
        u = source.utterance(job.split, index)
        rng = np.random.default_rng([job.seed, SPLITS[job.split], index, 7])
        voice = pick_voice(rng, job.held_out_voices)
        wav = engine.synth(u.text, voice)
        samples, speed = augment(wav, engine.sample_rate, rng, job.augment)
        out.append(Row(split=job.split, index=index, words=u.words, feats=fbank(samples).astype(np.float16),
                       num_samples=int(samples.shape[0]), voice=asdict(voice), speed=speed,
                       audio=samples if job.keep_audio else None))
    return out


def chunk_jobs(corpus, split: str, indices, seed: int, held_out_voices: bool, aug: Augment,
               keep_audio: bool = False) -> list[ChunkJob]:
    """Chunks on absolute row boundaries (index // CHUNK), so a row lands in the same chunk
    whatever subset of rows is asked for."""
    groups: dict[int, list] = {}
    for i in sorted(set(int(i) for i in indices)):
        groups.setdefault(i // CHUNK, []).append(i)
    return [ChunkJob(str(corpus), split, seed, held_out_voices, aug, tuple(rows), keep_audio)
            for _, rows in sorted(groups.items())]


def synthesize(corpus, split: str, indices, seed: int, *, held_out_voices: bool, aug: Augment,
               workers: int | None = None, keep_audio: bool = False, log=None,
               deadline: float | None = None, chunk_timeout: float = 300.0) -> list[Row]:
    """Rows `indices` of `split` (sentences from the tier at `corpus`), sorted by index. With
    a deadline (time.time()), the rows of the chunks done by then: a prefix of the sorted
    indices, so the GPU machine's training data is what its cores make in the time given.

    A worker that dies (espeak-ng crashing inside the C library) or hangs past `chunk_timeout`
    costs its chunk's rows, not the run: `multiprocessing.Pool.imap` would wait forever for
    a dead worker's result, so each chunk gets its own process here and the parent polls."""
    jobs = chunk_jobs(corpus, split, indices, seed, held_out_voices, aug, keep_audio)
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    t0 = time.perf_counter()
    if not jobs:
        return []
    ctx = mp.get_context("spawn")
    results: dict[int, list[Row]] = {}
    lost: list[int] = []
    running: dict[int, tuple] = {}  # job index -> (process, receiving end, started)
    nxt = done = 0
    stop = False
    try:
        while done < len(jobs):
            while not stop and nxt < len(jobs) and len(running) < workers:
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_chunk_worker, args=(jobs[nxt], send), daemon=True)
                proc.start()
                send.close()
                running[nxt] = (proc, recv, time.time())
                nxt += 1
            if not running:
                break
            mp.connection.wait([r for _, r, _ in running.values()], timeout=1.0)
            for k in list(running):
                proc, recv, started = running[k]
                part = None
                if recv.poll():
                    try:
                        part = recv.recv()
                    except EOFError:  # the worker died before sending
                        part = None
                elif proc.is_alive() and time.time() - started < chunk_timeout:
                    continue
                proc.join(timeout=0.1)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
                recv.close()
                del running[k]
                done += 1
                if isinstance(part, list):
                    results[k] = part
                else:
                    lost.append(k)
                    if log:
                        why = part if isinstance(part, str) else f"exit code {proc.exitcode}"
                        log(f"synth {split}: chunk {k} lost ({why}); its {len(jobs[k].indices)} rows are left out")
                if log and done % max(1, len(jobs) // 10) == 0:
                    log(f"synth {split}: {sum(len(v) for v in results.values())} rows, {time.perf_counter() - t0:.1f} s")
            if deadline is not None and time.time() > deadline and not stop and nxt < len(jobs):
                stop = True  # no new chunks; the ones running finish (a prefix up to them)
                if log:
                    log(f"synth {split}: time is up; finishing {len(running)} running chunks")
    finally:
        for proc, recv, _ in running.values():
            proc.kill()
            proc.join()
            recv.close()
    # a prefix of the chunks in order (under a deadline), less any lost chunk
    rows: list[Row] = []
    for k in range(nxt):
        rows += results.get(k, [])
    if stop and log:
        log(f"synth {split}: {len(rows)} of {len(indices)} rows by the deadline")
    return rows


def _chunk_worker(job: ChunkJob, send) -> None:
    # a test hook: the worker holding this row dies the way a crash in the C library would
    if os.environ.get("CUWFST_SYNTH_CRASH_ROW") in {str(i) for i in job.indices}:
        os._exit(11)
    try:
        send.send(synth_chunk(job))
    except Exception as e:  # a Python-level failure: reported, the chunk is lost
        send.send(f"{type(e).__name__}: {e}")
    finally:
        send.close()


def speed_report(rows: list[Row], seconds: float, workers: int) -> dict:
    audio = sum(r.seconds for r in rows)
    return {"utterances": len(rows), "audio_hours": round(audio / 3600, 3), "wall_seconds": round(seconds, 2),
            "workers": workers, "utterances_per_second": round(len(rows) / seconds, 1),
            "audio_seconds_per_second": round(audio / seconds, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model.synth", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="corpus tier (its LM gives the sentences)")
    ap.add_argument("--num", type=int, default=200)
    ap.add_argument("--split", choices=sorted(SPLITS), default="train")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--augment", choices=["train", "test", "clean"], default="train")
    ap.add_argument("--wav-dir", help="also write the first 20 rows as WAV files and a transcript list here")
    a = ap.parse_args(argv)
    aug = {"train": TRAIN_AUGMENT, "test": TEST_AUGMENT, "clean": CLEAN}[a.augment]
    t = time.perf_counter()
    rows = synthesize(a.corpus, a.split, range(a.num), a.seed, held_out_voices=a.split != "train", aug=aug,
                      workers=a.workers, keep_audio=bool(a.wav_dir))
    secs = time.perf_counter() - t
    workers = max(1, min(a.workers or os.cpu_count() or 1, -(-a.num // CHUNK)))
    print(json.dumps(speed_report(rows, secs, workers)))
    if a.wav_dir:
        os.makedirs(a.wav_dir, exist_ok=True)
        with open(os.path.join(a.wav_dir, "transcripts.txt"), "w") as f:
            for r in rows[:20]:
                name = f"{r.split}-{r.index:06d}.wav"
                write_wav(os.path.join(a.wav_dir, name), r.audio)
                f.write(f"{name}\t{r.voice['name']}\t{' '.join(r.words)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
