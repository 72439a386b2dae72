"""Head nodes: instances (AWS or GCP) whose aicluster-role is head or control-plane."""
from __future__ import annotations

from typing import Any

from .._props import ROLE
from .index import Index
from .kinds import GCE, HEAD_ROLES, INSTANCE


def find(ix: Index) -> list[Any]:
    return [r for r in ix.of(INSTANCE, GCE) if ix.tags(r).get(ROLE) in HEAD_ROLES]
