"""Optional dependencies, imported only where needed, with a message naming the extra."""

from __future__ import annotations

import importlib


def require(module: str, purpose: str, extra: str | None = None):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        hint = f"pip install 'cuwfst[{extra}]'" if extra else f"pip install {module}"
        raise ImportError(f"{purpose} needs the '{module}' package: {hint}") from e
