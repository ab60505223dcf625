"""Decoding: options, results, the offline decoder."""

from .offline import Decoder
from .options import DecoderOptions
from .result import Hypothesis

__all__ = ["Decoder", "DecoderOptions", "Hypothesis"]
