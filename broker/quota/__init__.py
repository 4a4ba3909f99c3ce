"""Client quotas on the broker (docs/security.md, "Quotas"): rates measured in sampled windows
(rate.py, pure), and the manager that records each response against its client's quotas and
says how long to throttle it (manager.py)."""
