"""docs/configuration-reference.md is generated from the configuration model (mcp_hub/config_reference.py)."""

from __future__ import annotations

import pytest

from mcp_hub import config
from mcp_hub.config_reference import COMMAND, EXPLAINED, REFERENCE, TABLES, render


@pytest.mark.slow
def test_the_committed_reference_is_the_generated_one() -> None:
    committed = REFERENCE.read_text(encoding="utf-8")
    assert committed == render(), f"docs/configuration-reference.md is stale; regenerate it: {COMMAND}"


@pytest.mark.slow
def test_every_table_and_key_is_listed() -> None:
    models = {model for _, model in TABLES}
    for name, field in config.HubConfig.model_fields.items():
        if name == "path":
            continue
        held = field.annotation
        inner = getattr(held, "__args__", ())
        assert held in models or any(a in models for a in inner), name
    text = render()
    assert set(EXPLAINED) == {heading for heading, _ in TABLES}
    for page in EXPLAINED.values():
        assert (REFERENCE.parent / page).is_file(), page
    for heading, model in TABLES:
        assert f"## `{heading}`" in text
        for key, field in model.model_fields.items():
            if field.annotation in models or any(a in models for a in getattr(field.annotation, "__args__", ())):
                continue  # a sub-table, under its own heading
            if (model, key) not in {(config.ServerConfig, "name"), (config.ServerConfig, "unusable")}:
                assert f"| `{key}` |" in text, (heading, key)
    assert "| `keep_alive` | `int` | `75` | ≥ 1 | Seconds an idle client connection is kept open." in text
