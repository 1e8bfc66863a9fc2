"""The tool-jobs component this package carries."""

from importlib import resources
from pathlib import Path

_NAME = "tool-jobs.wasm"


def bundled_component() -> Path:
    """The path of the component inside the installed package.

    A wheel of this package carries the component it was released with (the
    same version as the package). A package installed from a checkout has
    none: this raises ``FileNotFoundError`` saying how to get one.
    """
    found = resources.files(__package__) / _NAME
    if not found.is_file():
        raise FileNotFoundError(
            f"harness_jobs carries no {_NAME} (installed from a checkout?): "
            "pass the component's path, written by `jobs-host wasm --out DIR`, "
            "or install a released wheel"
        )
    return Path(str(found))
