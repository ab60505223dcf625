"""The graph image, the Graph object and its exporters."""

from .graph import Graph
from .image import CorruptGraphImage

__all__ = ["Graph", "CorruptGraphImage"]
