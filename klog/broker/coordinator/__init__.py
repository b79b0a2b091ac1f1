"""The log-backed runtime the broker's coordinators (groups, transactions) run on: see ``runtime.py``."""
