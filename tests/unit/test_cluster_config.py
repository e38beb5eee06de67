"""cluster.yaml passes the Ray cluster launcher's own validation (no cloud access)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.autoscaler._private.commands import prepare_config
from ray.autoscaler._private.util import validate_config

CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"


def _load() -> dict[str, Any]:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def test_cluster_yaml_is_a_valid_launcher_config() -> None:
    config = prepare_config(_load())
    validate_config(config)
    assert config["head_node_type"] in config["available_node_types"]
    assert set(config["available_node_types"]) == {"head", "worker"}


def test_nodes_get_java_and_this_package() -> None:
    setup = " ".join(_load()["setup_commands"])
    assert "openjdk-17" in setup
    assert "pip install" in setup and "~/dynbucket" in setup
    assert _load()["file_mounts"]["~/dynbucket"] == "."


def test_validation_rejects_a_bad_node_type() -> None:
    config = _load()
    config["available_node_types"]["worker"]["no_such_field"] = 1
    with pytest.raises(Exception, match="no_such_field"):
        validate_config(prepare_config(config))


def test_every_node_starts_ray_with_token_authentication() -> None:
    config = _load()
    starts = config["head_start_ray_commands"] + config["worker_start_ray_commands"]
    assert all("RAY_AUTH_MODE=token ray start" in c for c in starts if "ray start" in c)
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    assert "export RAY_AUTH_MODE=token" in " ".join(config["setup_commands"])  # drivers too
    assert "0.0.0.0" not in CLUSTER_YAML.read_text()  # nothing on all interfaces
