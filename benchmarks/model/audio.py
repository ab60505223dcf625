"""Voices, augmentation and features of the synthetic speech (numpy; fbank from
kaldi-native-fbank, else torchaudio's Kaldi-compatible fbank).

Every random choice of utterance i comes from `np.random.default_rng([seed, split, i, 7])`,
so a row's audio depends on (seed, split, i) only, whichever worker makes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16000
NUM_MEL_BINS = 80

# espeak-ng voices (lang/gmw/en*): every accent is heard in training and in the held-out sets
ACCENTS = ("en-us", "en", "en-gb-x-rp", "en-gb-scotland", "en-029", "en-us-nyc", "en-gb-x-gbclan",
           "en-gb-x-gbcwmd")
# voice variants (voices/!v): the held-out ones are never heard in training. Robotic,
# whispered and deliberately distorted variants are left out; m/f/klatt families are split
# so that each side has male, female and Klatt-synthesizer voices.
TRAIN_VARIANTS = ("", "m1", "m2", "m3", "m6", "m7", "f1", "f3", "f5", "klatt", "klatt2", "klatt4",
                  "adam", "Alex", "Andy", "annie", "aunty", "belinda", "benjamin", "boris", "caleb",
                  "david", "ed", "edward", "Gene", "grandma", "iven", "john", "Lee", "linda", "max",
                  "michel", "norbert", "paul", "quincy", "rob", "robert", "shelby", "travis", "Mr serious")
TEST_VARIANTS = ("m4", "m5", "m8", "f2", "f4", "klatt3", "Alicia", "Andrea", "grandpa", "steph", "Jacky",
                 "Reed", "iven2", "Mike")


@dataclass(frozen=True)
class Augment:
    """Per-utterance augmentation ranges. speed: factors drawn uniformly from (Kaldi's
    speed perturbation: tempo and pitch together); snr_db: white-to-brown noise at this
    signal-to-noise ratio (None: clean); gain_db: overall level."""

    speeds: tuple = (0.9, 1.0, 1.1)
    snr_db: tuple | None = (8.0, 40.0)
    gain_db: tuple = (-20.0, 0.0)


TRAIN_AUGMENT = Augment()
TEST_AUGMENT = Augment(speeds=(1.0,), snr_db=(15.0, 40.0))  # noisy, never speed-perturbed
CLEAN = Augment(speeds=(1.0,), snr_db=None, gain_db=(0.0, 0.0))


def pick_voice(rng: np.random.Generator, held_out: bool):
    """A random voice setting: accent, variant (from the training or the held-out pool),
    rate, pitch, pitch range and word gap."""
    from .espeak import Voice

    accent = ACCENTS[int(rng.integers(len(ACCENTS)))]
    pool = TEST_VARIANTS if held_out else TRAIN_VARIANTS
    variant = pool[int(rng.integers(len(pool)))]
    return Voice(name=accent + ("+" + variant if variant else ""), rate=int(rng.integers(130, 231)),
                 pitch=int(rng.integers(20, 81)), range=int(rng.integers(20, 91)),
                 wordgap=int(rng.choice([0, 0, 0, 1, 2])))


def _fast_len(n: int) -> int:
    """The smallest 2-3-5-smooth length >= n (fast FFT sizes)."""
    best = 1 << max(n - 1, 0).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return max(best, 1)


def resample(x: np.ndarray, rate_in: float, rate_out: float) -> np.ndarray:
    """Band-limited resampling through the FFT (the spectrum cut or zero-padded at the new
    Nyquist frequency). Speed perturbation by f is resample(x, rate * f, rate)."""
    x = np.asarray(x, np.float32)
    n = x.shape[0]
    out_len = int(round(n * rate_out / rate_in))
    if n == 0 or out_len == 0:
        return np.zeros(out_len, np.float32)
    if rate_in == rate_out:
        return x.copy()
    padded = _fast_len(n)  # silence at the end: costs nothing audible, makes the FFT fast
    m = int(round(padded * rate_out / rate_in))
    X = np.fft.rfft(x, padded)
    Y = np.zeros(m // 2 + 1, np.complex64)
    k = min(X.shape[0], Y.shape[0])
    Y[:k] = X[:k]
    y = np.fft.irfft(Y, m) * (m / padded)
    return y[:out_len].astype(np.float32)


def colored_noise(rng: np.random.Generator, n: int, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Unit-power noise with a random spectral slope: power ~ f^-beta, beta uniform in [0, 2]
    (white to brown), shaped in the frequency domain (flat below 50 Hz, so no DC drift)."""
    if n == 0:
        return np.zeros(0, np.float32)
    beta = float(rng.uniform(0.0, 2.0))
    m = _fast_len(n)
    spec = np.fft.rfft(rng.standard_normal(m).astype(np.float32))
    f = np.maximum(np.fft.rfftfreq(m, 1.0 / sample_rate), 50.0)
    w = np.fft.irfft(spec * (f ** (-beta / 2.0)).astype(np.float32), m)[:n].astype(np.float32)
    return w / max(float(np.sqrt(np.mean(w * w))), 1e-12)


def augment(x: np.ndarray, rate_in: int, rng: np.random.Generator, aug: Augment) -> tuple[np.ndarray, float]:
    """espeak's int16 samples at rate_in -> float32 in [-1, 1] at 16 kHz, speed-perturbed,
    with noise and gain. Returns (samples, speed factor)."""
    speed = float(aug.speeds[int(rng.integers(len(aug.speeds)))])
    y = resample(np.asarray(x, np.float32) / 32768.0, rate_in * speed, SAMPLE_RATE)
    if aug.snr_db is not None and y.size:
        power = float(np.mean(y * y))
        snr = float(rng.uniform(*aug.snr_db))
        y = y + colored_noise(rng, y.shape[0]) * np.sqrt(power / 10 ** (snr / 10.0))
    y *= 10 ** (float(rng.uniform(*aug.gain_db)) / 20.0)
    peak = float(np.max(np.abs(y))) if y.size else 0.0
    if peak > 0.99:  # clipping would be a distortion no real front end passes on
        y *= 0.99 / peak
    return y.astype(np.float32), speed


# ------------------------------------------------------------------ features
def fbank(samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """[frames, 80] log-mel filterbank, Kaldi's defaults (25 ms window, 10 ms shift, povey
    window, pre-emphasis 0.97), no dither, snip_edges False (frames = round(samples / 160))."""
    try:
        import kaldi_native_fbank as knf
    except ImportError:
        return _fbank_torchaudio(samples, sample_rate)
    opts = knf.FbankOptions()
    opts.frame_opts.samp_freq = float(sample_rate)
    opts.frame_opts.dither = 0.0
    opts.frame_opts.snip_edges = False
    opts.mel_opts.num_bins = NUM_MEL_BINS
    f = knf.OnlineFbank(opts)
    f.accept_waveform(float(sample_rate), np.asarray(samples, np.float32))
    f.input_finished()
    n = f.num_frames_ready
    if n == 0:
        return np.zeros((0, NUM_MEL_BINS), np.float32)
    return np.stack([np.asarray(f.get_frame(i), np.float32) for i in range(n)])


def _fbank_torchaudio(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    try:
        import torch
        import torchaudio
    except ImportError:
        raise ImportError("fbank needs kaldi-native-fbank or torchaudio") from None
    wav = torch.from_numpy(np.asarray(samples, np.float32))[None]
    feats = torchaudio.compliance.kaldi.fbank(wav, num_mel_bins=NUM_MEL_BINS, dither=0.0, snip_edges=False,
                                              sample_frequency=float(sample_rate))
    return feats.numpy().astype(np.float32)


def fbank_backend() -> str:
    try:
        import kaldi_native_fbank  # noqa: F401

        return "kaldi-native-fbank"
    except ImportError:
        return "torchaudio"


def read_wav(path) -> tuple[np.ndarray, int]:
    """(float32 mono samples in [-1, 1], sample rate) of a PCM WAV file (8/16/32-bit int)."""
    import wave

    with wave.open(str(path), "rb") as w:
        ch, width, rate, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        raw = w.readframes(n)
    if width == 1:
        x = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        x = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif width == 4:
        x = np.frombuffer(raw, "<i4").astype(np.float32) / 2147483648.0
    else:
        raise ValueError(f"{path}: {8 * width}-bit samples are not supported (8, 16 or 32-bit PCM)")
    return x.reshape(-1, ch).mean(axis=1).astype(np.float32), rate


def write_wav(path, samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> None:
    """16-bit PCM mono."""
    import wave

    pcm = np.clip(np.round(np.asarray(samples, np.float32) * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
