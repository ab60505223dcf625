"""Decoding: options, results, the offline and the streaming decoders."""

from .offline import Decoder
from .options import DecoderOptions
from .result import Hypothesis
from .streaming import EndpointConfig, EndpointRule, Stream, StreamingDecoder

__all__ = ["Decoder", "DecoderOptions", "Hypothesis", "StreamingDecoder", "Stream", "EndpointConfig",
           "EndpointRule"]
