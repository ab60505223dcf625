"""Decoding: options, results, the offline and the streaming decoders."""

from .lattice import Lattice, NBest, WordPosterior, lattices_to_k2
from .offline import Decoder
from .options import DecoderOptions
from .result import Hypothesis
from .streaming import EndpointConfig, EndpointRule, Stream, StreamingDecoder

__all__ = ["Decoder", "DecoderOptions", "Hypothesis", "StreamingDecoder", "Stream", "EndpointConfig",
           "EndpointRule", "Lattice", "NBest", "WordPosterior", "lattices_to_k2"]
