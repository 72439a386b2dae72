"""Pulumi entry point: read `aicluster:cluster` from the stack config and build the cluster."""
from aicluster.cluster import program

program()
