"""cuwfst: exact WFST decoding of CTC log-probs with k2 intersect_dense_pruned semantics."""

from .decoder import (Decoder, DecoderOptions, EndpointConfig, EndpointRule, Hypothesis, Lattice, NBest, Stream,
                      StreamingDecoder, WordPosterior, lattices_to_k2)
from .graph import CorruptGraphImage, Graph, SymbolTable, WrongFileType, open_graph

__version__ = "0.1.0"
__all__ = ["Decoder", "DecoderOptions", "Hypothesis", "StreamingDecoder", "Stream", "EndpointConfig",
           "EndpointRule", "Lattice", "NBest", "WordPosterior", "lattices_to_k2", "Graph", "SymbolTable",
           "open_graph", "CorruptGraphImage", "WrongFileType",
           "__version__"]
