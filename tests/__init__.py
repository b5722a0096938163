"""Middleware Hub test suite."""
