"""A handler module for the supervisor of test_models_page.py: it declares
nothing, it only makes every simulated model load LOAD_SCALE times slower
in the processes that import it (t-slow: 2 s -> 6 s), so that one cold start
lasts long enough to be read on two pages of a busy machine."""

from __future__ import annotations

from gpu_workers.models import SIM_TIME_SCALE

LOAD_SCALE = 3.0
SIM_TIME_SCALE["factor"] = LOAD_SCALE
