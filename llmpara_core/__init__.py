"""LLM-Para core: a first-order (roofline) performance model of LLM inference.

Imports no streamlit, pandas or plotly. Units are SI; GB = 1e9 bytes, GiB = 2**30 bytes.
"""

from .errors import ConfigError, InfeasibleError, LLMParaError, PresetNotFoundError

__version__ = "0.1.0"

__all__ = ["ConfigError", "InfeasibleError", "LLMParaError", "PresetNotFoundError", "__version__"]
