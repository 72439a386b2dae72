"""Where the files that ship with aicluster live: the jinja2 templates and the policy pack.

In the repository they are the top-level folders templates/ and policies/, beside components/
(the product's fixed layout, and where `pulumi preview --policy-pack policies` finds the pack). A
wheel carries the same folders inside the package, as aicluster/templates and aicluster/policies
(pyproject.toml maps them there), so an installed aicluster needs no checkout.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT_DIR = PACKAGE_DIR.parent.parent      # components/aicluster -> the repository, in a checkout


def shipped_dir(name: str) -> Path:
    """The folder `name` (templates, policies) inside the installed package, else in the checkout."""
    for candidate in (PACKAGE_DIR / name, CHECKOUT_DIR / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"{name}/ is neither in the aicluster package ({PACKAGE_DIR}) nor in its checkout "
                            f"({CHECKOUT_DIR}): reinstall aicluster")
