"""Shared fixtures for every test tier (owned by H-net)."""
