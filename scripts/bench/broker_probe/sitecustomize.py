"""Loads the in-situ broker probe (scripts/bench/broker_probe/_broker_probe.py) into a
process started with this directory on PYTHONPATH, when BROKER_PROBE_OUT is set; nothing
otherwise. A benchmark tool, not product code: see that module."""

import os

if os.environ.get("BROKER_PROBE_OUT"):
    import _broker_probe

    _broker_probe.install()
