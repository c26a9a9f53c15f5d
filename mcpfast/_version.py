"""The package version; the compiled core must carry the same one (checked at import)."""

__version__ = "0.1.0"
