"""Project metadata: environment.yml mirrors pyproject.toml, README and CI agree."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _spec(req: str) -> str:
    return req.strip().lower().replace(" ", "")


def test_environment_yml_lists_the_pyproject_packages():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        reqs += extra
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    conda = [d for d in conda if _name(d) not in {"python", "pip"}]
    # packages conda-forge lacks (the workflow linters) come through its pip section
    conda += [d for d in env["dependencies"] if isinstance(d, dict)
              for d in d.get("pip", []) if not d.startswith("-e")]
    assert {_name(r) for r in reqs} == {_name(d) for d in conda}
    # the same version bounds, too
    assert {_spec(r) for r in reqs} == {_spec(d) for d in conda}


def test_constraints_pin_every_direct_dependency():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in meta["dependencies"]}
    for extra in meta["optional-dependencies"].values():
        names |= {_name(r) for r in extra}
    pins = {_name(line) for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line and not line.startswith("#") and "==" in line}
    assert names <= pins, names - pins


def test_readme_commands_and_ci():
    readme = (ROOT / "README.md").read_text()
    first = readme[:readme.index("##")] if "##" in readme else readme
    assert "make book" in first and "make test" in first, "README shows both commands first"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci
    assert [line for line in ci.splitlines() if line.startswith("make")] == ["make test"]
