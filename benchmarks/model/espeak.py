"""A thin ctypes binding to libespeak-ng: text in, 16-bit PCM samples out.

The library and its data come from the `espeakng-loader` wheel (it bundles both), so the
same code runs here and on the GPU machine, which has no espeak-ng package and no network.
A system libespeak-ng is used only when that wheel is missing (`ESPEAK_NG_LIBRARY` and
`ESPEAK_NG_DATA` override both).

espeak-ng keeps its state in globals, so there is one `Espeak` per process: synthesis is
made parallel with processes (benchmarks.model.synth), never threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

import numpy as np

# speak_lib.h
AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_DONT_EXIT = 0x8000  # report errors instead of calling exit()
POS_CHARACTER = 1
CHARS_UTF8 = 1
EE_OK = 0
PARAM = {"rate": 1, "volume": 2, "pitch": 3, "range": 4, "wordgap": 7}

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class EspeakUnavailable(RuntimeError):
    """No libespeak-ng (and data) could be found."""


def locate() -> tuple[str, str | None]:
    """(library path, data directory or None for the library's default)."""
    lib, data = os.environ.get("ESPEAK_NG_LIBRARY"), os.environ.get("ESPEAK_NG_DATA")
    if lib:
        return lib, data
    try:
        import espeakng_loader

        return espeakng_loader.get_library_path(), data or espeakng_loader.get_data_path()
    except ImportError:
        pass
    found = ctypes.util.find_library("espeak-ng")
    if not found:
        raise EspeakUnavailable("no libespeak-ng: pip install espeakng-loader (bundles the library and data)")
    return found, data


def available() -> bool:
    try:
        locate()
        return True
    except EspeakUnavailable:
        return False


@dataclass(frozen=True)
class Voice:
    """One speaker setting. name: an espeak voice with an optional variant, `en-us+f3`;
    rate: words per minute (80-450); pitch and range: 0-100 (espeak's 50 is the voice's
    own); wordgap: extra pause between words, in units of 10 ms at the default rate."""

    name: str = "en-us"
    rate: int = 175
    pitch: int = 50
    range: int = 50
    wordgap: int = 0


class Espeak:
    """The process' espeak-ng engine. `synth(text, voice)` -> int16 samples at `sample_rate`."""

    _instance: Espeak | None = None

    def __init__(self):
        path, data = locate()
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise EspeakUnavailable(f"cannot load {path}: {e}") from None
        lib = self.lib
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.restype = ctypes.c_int
        rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, data.encode() if data else None,
                                     INITIALIZE_DONT_EXIT)
        if rate <= 0:
            raise EspeakUnavailable(f"espeak_Initialize failed ({rate}) with data {data}")
        self.sample_rate = int(rate)
        self._chunks: list[np.ndarray] = []

        def on_audio(wav, n, events):  # called from inside espeak_Synth, same thread
            if n > 0 and wav:
                self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            return 0  # 0: go on

        self._callback = _CALLBACK(on_audio)  # kept: ctypes must not free it while espeak holds it
        lib.espeak_SetSynthCallback(self._callback)
        self._voice: str | None = None

    @classmethod
    def get(cls) -> Espeak:
        """The one engine of this process (created on first use)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def set_voice(self, voice: Voice) -> None:
        if voice.name != self._voice:
            if self.lib.espeak_SetVoiceByName(voice.name.encode()) != EE_OK:
                raise ValueError(f"espeak-ng has no voice {voice.name!r}")
            self._voice = voice.name
        for key in ("rate", "pitch", "range", "wordgap"):
            # setting a voice resets the parameters, so every one is set every time
            if self.lib.espeak_SetParameter(PARAM[key], int(getattr(voice, key)), 0) != EE_OK:
                raise ValueError(f"espeak-ng refused {key}={getattr(voice, key)}")

    def synth(self, text: str, voice: Voice = Voice()) -> np.ndarray:
        """int16 samples of `text` spoken by `voice` (espeak's own leading/trailing silence kept)."""
        self.set_voice(voice)
        self._chunks = []
        raw = text.encode("utf-8") + b"\0"
        err = self.lib.espeak_Synth(raw, len(raw), 0, POS_CHARACTER, 0, CHARS_UTF8, None, None)
        if err != EE_OK:
            raise RuntimeError(f"espeak_Synth failed ({err}) on {text[:60]!r}")
        self.lib.espeak_Synchronize()
        out = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        self._chunks = []
        return out
