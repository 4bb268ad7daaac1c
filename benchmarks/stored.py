"""Stored benchmark results as JSON objects: shared by the benchmark scripts' ``--mc FILE`` options."""

from __future__ import annotations

import json


def load_json(path: str | None) -> dict:
    """The JSON object in ``path``, or ``{}`` when there is no path or no file yet."""
    if not path:
        return {}
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}


def dump_json(path: str | None, obj: dict) -> None:
    """Write ``obj`` to ``path`` (indented JSON); nothing when there is no path."""
    if path:
        with open(path, "w") as fh:
            json.dump(obj, fh, indent=1)
