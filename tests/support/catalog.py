"""Catalog facts the tests share: the AWS types the moto cross-check leaves out
(tests/test_catalog.py, tests/contracts/test_matrix.py)."""
from __future__ import annotations

# Catalog AWS types moto's copy of DescribeInstanceTypes does not have yet, each with the primary
# sources its facts were checked against instead. tests/test_catalog.py fails when moto gains one, so the
# cross-check then covers it.
NOT_IN_MOTO = {
    "p6e-gb200.36xlarge": "Capacity-Block-only UltraServer node; facts from the AWS P6 page, the EKS user guide "
                          "(ml-eks-nvidia-ultraserver) and DescribeInstanceTypes as quoted in NVIDIA/aicr issue 1256",
}
