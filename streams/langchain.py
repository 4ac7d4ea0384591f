"""Deprecated: `emgas.streams.langchain` moved to `emgas.streams.interfaces.langchain` (issue 29).

Importing the old path still works, warns once, and gives the new module
itself, so its names and their identity are the same.
"""

import importlib
import sys
import warnings

warnings.warn("emgas.streams.langchain moved to emgas.streams.interfaces.langchain; the old path will be removed",
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = importlib.import_module("emgas.streams.interfaces.langchain")
