"""Crash-log diagnosis: a catalogue of bring-up failures (SGLang, our engine, torch, transformers) as
data, and a parser that turns a log into findings, layer-index findings tied to the layer map."""

from .catalogue import PATTERNS, codes
from .all_patterns import PATTERNS as ALL_PATTERNS, codes as all_codes
from bringup.core.finding import Finding, LayerInfo

from .result import Diagnosis
from .parser import diagnose, diagnose_log

__all__ = ["diagnose", "diagnose_log", "Diagnosis", "Finding", "LayerInfo", "PATTERNS", "codes", "ALL_PATTERNS", "all_codes"]
