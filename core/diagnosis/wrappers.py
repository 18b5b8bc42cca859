"""Lines that only point elsewhere ("see root cause above", "scheduler is dead"): an engine's
wrapper around the real failure, never the failure itself.

One list for both readers: `failure` ranks such a line below any exception or assert, and the
parser never reports one as an unrecognised error of its own.
"""

from __future__ import annotations

import re

SEE_ABOVE = re.compile(
    r"see root cause above|See the error messages above|EngineCore failed to start|Engine core initialization failed|"
    r"scheduler is dead|Please check if there are relevant logs|Initialization failed|The above exception was the direct|"
    r"During handling of the above exception|ChildFailedError|Backend worker is gone|encountered an error while|"
    r"^\S*: ?failed to load model$|failed to load model$",
    re.IGNORECASE,
)
