"""Benchmark reporting helpers (turn pytest-benchmark JSON into tables and charts)."""
