"""The command line: app loading and argument parsing (no server is started here)."""

from __future__ import annotations

import pytest

from mcpfast import Server, cli


def test_load_app_specs() -> None:
    assert isinstance(cli.load_app("mcpfast.server.demo:app"), Server)
    assert isinstance(cli.load_app("mcpfast.server.conformance"), Server)
    with pytest.raises(SystemExit, match="cannot import"):
        cli.load_app("no_such_module_xyz:app")
    with pytest.raises(SystemExit, match="no attribute"):
        cli.load_app("mcpfast.server.demo:nope")


def test_both_transports_are_accepted() -> None:
    # Parsing only: `serve --transport http` would start a server (its tests live with HTTP).
    parser = cli._parser()
    assert parser.parse_args(["serve", "--transport", "stdio"]).transport == "stdio"
    assert parser.parse_args(["serve", "--transport", "http"]).transport == "http"


def test_conformance_fixture_offers_the_contract() -> None:
    app = cli.load_app("mcpfast.server.conformance:app")
    caps = app.capabilities()
    assert {"tools", "resources", "prompts", "logging", "completions"} <= set(caps)
    assert caps["resources"]["subscribe"] is True
    names = [t.definition["name"] for t in app._tools.values()]
    for required in (
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_tool_with_logging",
        "test_tool_with_progress",
        "test_error_handling",
        "test_sampling",
        "test_elicitation",
        "test_elicitation_sep1034_defaults",
        "test_elicitation_sep1330_enums",
        "json_schema_2020_12_tool",
    ):
        assert required in names
    assert all(t.definition.get("description") for t in app._tools.values())
    assert set(app._resources) == {"test://static-text", "test://static-binary", "test://watched-resource"}
    assert [t.definition["uriTemplate"] for t in app._templates] == ["test://template/{id}/data"]
    assert all(p.definition.get("description") for p in app._prompts.values())


def test_granian_runner_without_granian_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from mcpfast.transports import http_runner

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "granian" else real(name, *a))
    started: list[object] = []
    monkeypatch.setattr(http_runner, "run", lambda *a, **k: started.append(a))
    assert cli.main(["serve", "--transport", "http", "--runner", "granian", "--port", "1"]) == 2
    assert "pip install 'mcpfast[granian]'" in capsys.readouterr().err
    assert not started  # nothing was served
