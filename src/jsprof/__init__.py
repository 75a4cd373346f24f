"""jsprof: profile JavaScript on real engines; speaks the W3C JS Self-Profiling trace format."""

from . import engines
from .io import load, save
from .record import record
from .trace import ProfilerFrame, ProfilerTrace, Recording, TraceBuilder, Track

__all__ = [
    "engines",
    "load",
    "record",
    "save",
    "ProfilerFrame",
    "ProfilerTrace",
    "Recording",
    "TraceBuilder",
    "Track",
]
__version__ = "0.1.0"
