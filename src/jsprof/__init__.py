"""jsprof: profile JavaScript on real engines; speaks the W3C JS Self-Profiling trace format."""

from .io import load, save
from .trace import ProfilerFrame, ProfilerTrace, Recording, TraceBuilder, Track

__all__ = ["load", "save", "ProfilerFrame", "ProfilerTrace", "Recording", "TraceBuilder", "Track"]
__version__ = "0.1.0"
