"""The Slurm controller's shape, shared by the clouds' components (components/aicluster/aws/slurm.py,
components/aicluster/gcp/slurm.py); the cloud parts (where a secret is stored, the bucket, the head
node) are plugged in by each. Thin Pulumi helpers: the texts come from aicluster.render.slurm_files.
"""
from __future__ import annotations

from typing import Callable

import pulumi
import pulumi_random as random

from aicluster.design.model import ClusterContext
from aicluster.design.parts import SlurmDesign

# (resource name, key under the cluster's secrets, what it is, its value, options) -> the stored secret
StoreSecret = Callable[[str, str, str, pulumi.Input[str], pulumi.ResourceOptions], pulumi.Resource]


class SlurmControllerShape(pulumi.ComponentResource):
    """The Slurm controller of every cloud: a component that holds the cluster's secrets, made here
    and stored by the cloud's `store` (Secrets Manager, Secret Manager): the munge key (1 KiB of
    randomness, base64) and, once accounting is on, the slurmdbd password. Secret in Pulumi,
    protected and kept (docs/data-safety.md). The cloud's component adds its bucket, the head's
    identity, the node-name zone and the head node, with `self.child` as their options."""

    munge: pulumi.Resource
    accounting: pulumi.Resource | None
    accounting_password: pulumi.Output[str] | None

    def __init__(self, type_: str, name: str, context: ClusterContext, slurm: SlurmDesign, store: StoreSecret,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_, name, None, opts)
        if slurm is None:
            raise ValueError(f"cluster {context.name!r}: a Slurm controller needs a SlurmDesign (ClusterDesign.slurm), "
                             "which only a cluster with scheduler 'slurm' has")
        self.child = pulumi.ResourceOptions(parent=self)
        # Protected always; kept by `aicluster destroy` (docs/teardown.md) while what they open is:
        # the munge key with the head node (slurm.head_node.on_delete), the slurmdbd password while
        # the head or the managed database (slurm.accounting_on_delete) is kept.
        stateful = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=slurm.head_on_delete == "retain")
        database = slurm.accounting_settings.database if slurm.accounting_settings else None
        password_kept = slurm.head_on_delete == "retain" or (database is not None and database.on_delete == "retain")
        munge_bytes = random.RandomBytes(f"{name}-munge-bytes", length=1024, opts=stateful)
        self.munge = store(f"{name}-munge", "munge-key", "munge key shared by every Slurm node", munge_bytes.base64,
                           stateful)
        # The accounting password exists only once accounting is on; its name is under the
        # cluster's secrets, so the head's permissions do not change when it appears.
        self.accounting = self.accounting_password = None
        if slurm.accounting:
            # Letters and digits only: it goes into SQL and slurmdbd.conf unquoted.
            kept = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=password_kept)
            password = random.RandomPassword(f"{name}-slurmdbd-password", length=40, special=False, opts=kept)
            self.accounting = store(f"{name}-slurmdbd", "slurmdbd-password", "slurmdbd database password",
                                    password.result, kept)
            # A managed database (RDS, Cloud SQL) is created with the same password.
            self.accounting_password = password.result


def pool_facts(pools: dict, *attributes: str) -> pulumi.Output[dict]:
    """{attribute: {pool name: value}} of the pools' components (GpuPool), once all are known; a
    missing value (a pool without a placement group) is ""."""
    names = list(pools)
    values = [getattr(pools[n], a) or "" for a in attributes for n in names]
    return pulumi.Output.all(*values).apply(lambda v: {
        a: dict(zip(names, v[i * len(names):(i + 1) * len(names)])) for i, a in enumerate(attributes)})


class SlurmConfigurationShape(pulumi.ComponentResource):
    """What follows the pools on every cloud: the published files (aicluster.render.slurm_files), one
    bucket object per key under the head's prefix, pulled by its aicluster-sync timer, and the
    head's right to launch the pools' nodes (the cloud's component adds it, with `self.child`)."""

    def __init__(self, type_: str, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_, name, None, opts)
        self.child = pulumi.ResourceOptions(parent=self)

    def publish(self, keys: tuple[str, ...], files: pulumi.Output[dict],
                put: Callable[[str, pulumi.Output[str]], pulumi.Resource]) -> None:
        """`put(key, content)` makes the cloud's object of one published file."""
        for key in keys:
            put(key, files.apply(lambda f, k=key: f[k]))
