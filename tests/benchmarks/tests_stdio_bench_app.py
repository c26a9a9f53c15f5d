"""An app whose echo always fails (a tool error), for the benchmark client's reply check."""

from mcpfast import Server

app = Server("failing-echo")


@app.tool()
def echo(text: str) -> str:
    """Fail."""
    raise RuntimeError("no echo today")
