"""The graph image, the Graph object, its exporters and its symbol tables."""

from .graph import Graph
from .image import CorruptGraphImage
from .sources import WrongFileType, open_graph
from .symbols import SymbolTable

__all__ = ["Graph", "CorruptGraphImage", "SymbolTable", "WrongFileType", "open_graph"]
