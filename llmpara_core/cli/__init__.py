"""Command line: ``llmpara`` / ``python -m llmpara_core``. ``main`` parses the kernel's flags
(``analyze``, ``models``, ``hardware``); each analysis adds its subcommand from its own module
here (``metrics``, ``hetero``, ``shard``, ``dse``, ``speculative``, ``validate``). Every error a
user can cause ends with exit code 2 and one line on stderr.
"""

from .base import main

__all__ = ["main"]
