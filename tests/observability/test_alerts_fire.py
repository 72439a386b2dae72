"""A real Prometheus (Debian's package) scrapes a fake exporter on 127.0.0.1 serving DCGM, node,
Slurm and aicluster textfile samples for two clusters of the aws-p5-slurm design, evaluates the
rendered rules (with `for: 0s`) and fires exactly the seeded faults' alerts; the healthy cluster
fires none."""
from __future__ import annotations

import time

from aicluster.render.alert_rules import rules_yaml
from aicluster.design.cluster import design_cluster
from aicluster.design.observability import AlertDurations, monitoring_design
from aicluster.spec.cluster import parse_spec
from tests.support import stack_spec
from tests.support.metric_samples import EXPECTED_FAULTY, Sampler
from tests.support.prometheus import check_rules, fake_exporter, firing, prometheus

# Fire on the first evaluation that sees a fault; rates over 10 s of 1 s scrapes.
NOW = AlertDurations(**{name: "0s" for name in AlertDurations.__dataclass_fields__ if name != "rate_window"},
                     rate_window="10s")


def _key(alert: dict) -> tuple:
    labels = alert["labels"]
    for expected in EXPECTED_FAULTY:
        if expected[0] == labels["alertname"] and all(labels.get(k) == v for k, v in expected[1:]):
            return expected
    return (labels["alertname"], tuple(sorted(labels.items())))


def test_seeded_faults_fire_and_healthy_samples_stay_quiet(tmp_path):
    watch = monitoring_design(design_cluster(parse_spec(stack_spec("aws-p5-slurm"))), durations=NOW)
    rules = tmp_path / "rules.yaml"
    rules.write_text(rules_yaml(watch))
    assert check_rules(rules).returncode == 0
    sampler = Sampler()
    with fake_exporter(sampler.text) as port, prometheus(tmp_path, port, rules) as url:
        deadline, seen = time.monotonic() + 40, set()
        while time.monotonic() < deadline:
            alerts = firing(url)
            seen = {_key(a) for a in alerts if a["labels"].get("cluster") == "faulty"}
            if seen >= EXPECTED_FAULTY:
                break
            time.sleep(0.5)
        time.sleep(2)      # a few more evaluations: nothing else may fire
        alerts = firing(url)
    healthy = [a["labels"] for a in alerts if a["labels"].get("cluster") != "faulty"]
    assert not healthy, f"healthy samples fired: {healthy}"
    assert {_key(a) for a in alerts} == EXPECTED_FAULTY
    for a in alerts:
        assert a["annotations"]["threshold_origin"] and a["annotations"]["threshold"], a
