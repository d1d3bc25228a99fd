"""examples/guard.toml, the file the README points a new user to, held to the config model: it
names every key the model takes, the values it sets are the defaults (unless its comment says
otherwise), and it parses as a config; the README's own guard.toml parses too."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from guard.config import GuardConfig, parse_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "guard.toml"
NOT_DEFAULT = "(not the default)"  # a value the example sets for show, marked so in its comment


def _keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every key of the config, dotted, with its default; sections by their own keys."""
    found: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = field.alias or name
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found |= _keys(annotation, f"{prefix}{key}.")
        else:
            found[f"{prefix}{key}"] = field.get_default(call_default_factory=True)
    return found


def _named(text: str) -> set[str]:
    """The keys the example names, set or commented out, dotted with their section."""
    named, section = set(), ""
    for line in text.splitlines():
        if header := re.match(r"#?\s*\[\[?([a-z_.]+)\]\]?(\s+#.*)?$", line.strip()):
            section = header.group(1) + "."
        elif key := re.match(r"#?\s*([a-z_]+)\s*=", line.strip()):
            named.add(section + key.group(1))
    return named


def test_the_example_names_every_key_the_config_takes() -> None:
    text = EXAMPLE.read_text()
    missing = sorted(k for k in _keys(GuardConfig) if k not in _named(text) and not k.startswith("arms"))
    assert not missing, f"examples/guard.toml does not name: {', '.join(missing)}"


def test_the_values_the_example_sets_are_the_defaults_and_it_parses() -> None:
    text = EXAMPLE.read_text()
    config = parse_config(tomllib.loads(text), source=str(EXAMPLE))
    defaults = GuardConfig()
    marked = {section + key for section, key in _marked(text)}
    for dotted in _keys(GuardConfig):
        if dotted in marked or dotted.startswith("arms"):
            continue
        shown, default = _at(config, dotted), _at(defaults, dotted)
        assert shown == default, f"examples/guard.toml sets {dotted} = {shown!r}, the default is {default!r}"


def _marked(text: str) -> list[tuple[str, str]]:
    found, section = [], ""
    for line in text.splitlines():
        if header := re.match(r"\[\[?([a-z_.]+)\]\]?(\s+#.*)?$", line.strip()):
            section = header.group(1) + "."
        elif (key := re.match(r"([a-z_]+)\s*=", line.strip())) and NOT_DEFAULT in line:
            found.append((section, key.group(1)))
    return found


def _at(config: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


def test_the_readmes_guard_toml_parses_as_a_config() -> None:
    shown = re.findall(r"^```toml\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)
    assert len(shown) == 1, "the README shows one guard.toml"
    parse_config(tomllib.loads(shown[0]), source="README.md")
