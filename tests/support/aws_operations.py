"""The AWS API operation names per IAM service prefix (tests/data/aws-operations/operations.json),
and how that file is made from the installed botocore (`python -m tests.support.aws_operations`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

FILE = Path(__file__).resolve().parents[1] / "data" / "aws-operations" / "operations.json"
MODEL = {"elasticfilesystem": "efs", "aps": "amp"}     # IAM service prefix -> botocore model name


def vendored() -> dict:
    return json.loads(FILE.read_text())


def from_botocore(prefixes) -> dict:
    import botocore
    import botocore.session

    session = botocore.session.get_session()
    services = {}
    for prefix in sorted(prefixes):
        model = session.get_service_model(MODEL.get(prefix, prefix))
        services[prefix] = {"model": MODEL.get(prefix, prefix), "api_version": model.api_version,
                            "operations": sorted(model.operation_names)}
    return {"botocore": botocore.__version__, "services": services,
            "note": "API operation names per IAM service prefix, from botocore's service models "
                    "(botocore/data/<model>/<version>/service-2.json); see README.md"}


def main() -> None:
    from aicluster.catalog.deployer_permissions import load_deployer_table

    json.dump(from_botocore(load_deployer_table().aws_services), sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
