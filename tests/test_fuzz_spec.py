"""Property: for ANY input, design_cluster(parse_spec(x)) returns a ClusterDesign or raises SpecError.

Nothing else may escape: not KeyError, TypeError, ValueError from ipaddress, RecursionError... A
SpecError always holds at least one problem and renders as a message, never a traceback.
Set AICLUSTER_FUZZ_EXAMPLES to run more examples (CI's nightly job raises it).
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from aicluster.design.model import ClusterDesign
from aicluster.design.cluster import design_cluster
from aicluster.errors import SpecError
from aicluster.spec.cluster import parse_spec
from tests.support.fuzz import FUZZ, VALID_SPECS, json_paths, json_values, mutated_specs, value_at

def test_base_specs_are_valid():
    for data in VALID_SPECS:
        assert isinstance(design_cluster(parse_spec(data)), ClusterDesign)


# --- strategies ---------------------------------------------------------------------------------

# --- the property -------------------------------------------------------------------------------


def _design_or_spec_error(data):
    try:
        result = design_cluster(parse_spec(data))
    except SpecError as err:
        assert err.problems, "a SpecError must hold at least one problem"
        text = str(err)
        assert text.strip()
        assert "Traceback" not in text
        for problem in err.problems:
            assert isinstance(problem.path, str)
            assert isinstance(problem.allowed, str) and problem.allowed
            assert (problem.path or "<root>") in text
        return err
    assert isinstance(result, ClusterDesign)
    return result


@FUZZ
@given(json_values)
@example(None)
@example([])
@example("")
@example({})
@example(float("nan"))
def test_any_json_value_designs_or_raises_spec_error(data):
    _design_or_spec_error(data)


@FUZZ
@given(mutated_specs())
def test_mutated_spec_designs_or_raises_spec_error(data):
    _design_or_spec_error(data)


@FUZZ
@given(st.sampled_from(VALID_SPECS), st.sampled_from(["pools", "storage"]), st.integers(0, 1),
       st.sampled_from(["name", "instance_type", "min_nodes", "max_nodes", "capacity", "efa", "image",
                        "root_volume_gib", "type", "mount", "capacity_gib", "throughput_mbps_per_tib",
                        "deployment_type", "import_path", "protect"]),
       json_values)
def test_field_replaced_with_any_value(base, section, index, field, value):
    data = copy.deepcopy(base)
    items = data.get(section) or []
    if index < len(items):
        items[index][field] = copy.deepcopy(value)
    _design_or_spec_error(data)


def test_valid_spec_survives_every_single_key_drop():
    for base in VALID_SPECS:
        for path in [p for p in json_paths(base) if p]:
            data = copy.deepcopy(base)
            del value_at(data, path[:-1])[path[-1]]
            _design_or_spec_error(data)


def test_deeply_nested_input_raises_spec_error():
    value: list = []
    for _ in range(1000):
        value = [value]
    data = copy.deepcopy(VALID_SPECS[0])
    data["tags"] = {"team": value}
    _design_or_spec_error(data)


@pytest.mark.parametrize("depth", [50, 500])
def test_moderately_nested_input_raises_spec_error(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    data = copy.deepcopy(VALID_SPECS[0])
    data["pools"][0]["max_nodes"] = value
    assert isinstance(_design_or_spec_error(data), SpecError)


def test_nan_and_inf_in_float_fields_are_spec_errors():
    for bad in (float("nan"), float("inf"), float("-inf")):
        data = copy.deepcopy(VALID_SPECS[0])
        data["workload"]["model_params_b"] = bad
        assert isinstance(_design_or_spec_error(data), SpecError)
