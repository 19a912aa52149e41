"""Calibration: what fraction of the roofline a real inference stack reaches, fitted on published
measurements. ``efficiency`` holds the efficiency model and framework profiles (applied through
``roofline.op_time_s``), ``measurements`` maps published rows to ``analysis.analyze`` scenarios,
``fitting`` refits the model and ``summary`` reports the error by class, stack and regime.
"""

from .efficiency import (FRAMEWORKS, GENERIC, default_table, efficiency_for, framework_of_label,
                         provisional_table, resolve_framework, table_from_dict, table_to_toml)

__all__ = ["FRAMEWORKS", "GENERIC", "default_table", "efficiency_for", "framework_of_label",
           "provisional_table", "resolve_framework", "table_from_dict", "table_to_toml"]
