"""cuwfst: exact WFST decoding of CTC log-probs with k2 intersect_dense_pruned semantics."""

from .decoder import Decoder, DecoderOptions, EndpointConfig, EndpointRule, Hypothesis, Stream, StreamingDecoder
from .graph import CorruptGraphImage, Graph, SymbolTable, WrongFileType, open_graph

__version__ = "0.1.0"
__all__ = ["Decoder", "DecoderOptions", "Hypothesis", "StreamingDecoder", "Stream", "EndpointConfig",
           "EndpointRule", "Graph", "SymbolTable", "open_graph", "CorruptGraphImage", "WrongFileType",
           "__version__"]
