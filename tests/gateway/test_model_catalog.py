"""Model names: the served model, ``MODEL:ADAPTER`` and a bare adapter id select what they name, while
some live worker holds the adapter; anything else is a 404 that lists what is served."""

from __future__ import annotations

import pytest

from kvgate.gateway.core.models import ModelCatalog
from kvgate.gateway.errors import ErrorKind, GatewayError


def test_names_select_the_base_model_or_an_adapter_held_now() -> None:
    held = ["sql"]
    catalog = ModelCatalog("smol", lambda: tuple(held))
    assert catalog.resolve("smol") == ""
    assert catalog.resolve("smol:sql") == "sql"
    assert catalog.resolve("sql") == "sql"
    assert catalog.names() == ["smol", "smol:sql"]
    held.clear()  # the worker holding it left
    with pytest.raises(GatewayError) as caught:
        catalog.resolve("smol:sql")
    assert caught.value.kind is ErrorKind.NOT_FOUND
    assert catalog.names() == ["smol"]


@pytest.mark.parametrize("name", ["other", "other:sql", "smol:", "smol:nope", ":sql", "smol:sql:x"])
def test_other_names_are_not_found_and_the_message_lists_the_served_ones(name: str) -> None:
    catalog = ModelCatalog("smol", lambda: ("sql", "support"))
    with pytest.raises(
        GatewayError, match="This server serves: `smol`, `smol:sql`, `smol:support`"
    ) as caught:
        catalog.resolve(name)
    assert (caught.value.param, caught.value.code) == ("model", "model_not_found")
