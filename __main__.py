"""Pulumi entry point: read `aicluster:cluster` from the stack config and build the cluster."""
from components.cluster import program

program()
