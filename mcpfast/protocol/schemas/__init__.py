"""Data package: the vendored official MCP JSON Schemas, one ``<version>.json`` per revision."""

__all__: list[str] = []
