"""The browser's timeline (long animation frames, interactions, page load) as the fleet
reads it: the shape, its checks and windows live in `jsprof.timeline`, shared with the
local Chromium engine and `report --during`; this name stays for the fleet's modules."""

from ..timeline import (  # noqa: F401
    DEFAULT_SLOWER_THAN,
    DURING,
    MAX_INTERACTIONS,
    MAX_LONG_FRAMES,
    MAX_SCRIPTS,
    MAX_TEXT,
    MAX_TIME_MS,
    MAX_URL,
    NOT_CAPTURED,
    PageLoad,
    TimelineError,
    check,
    entry_name,
    in_windows,
    interaction_end,
    page_loads,
)
