"""msprof's HCCL enum tables (id, name), docs/formats.md §6: created in every db we write, even without
communication, because several msprof-analyze recipes and advisor queries join them."""

from __future__ import annotations

__all__ = ["ENUMS", "enum_id"]

ENUMS: dict[str, list[tuple[int, str]]] = {
    "ENUM_HCCL_DATA_TYPE": [(0, "INT8"), (1, "INT16"), (2, "INT32"), (3, "FP16"), (4, "FP32"), (5, "INT64"),
                            (6, "UINT64"), (7, "UINT8"), (8, "UINT16"), (9, "UINT32"), (10, "FP64"), (11, "BFP16"),
                            (12, "INT128"), (255, "RESERVED"), (65534, "N/A"), (65535, "INVALID_TYPE")],
    "ENUM_HCCL_LINK_TYPE": [(0, "ON_CHIP"), (1, "HCCS"), (2, "PCIE"), (3, "ROCE"), (4, "SIO"), (5, "HCCS_SW"),
                            (6, "STANDARD_ROCE"), (255, "RESERVED"), (65534, "N/A"), (65535, "INVALID_TYPE")],
    "ENUM_HCCL_TRANSPORT_TYPE": [(0, "SDMA"), (1, "RDMA"), (2, "LOCAL"), (255, "RESERVED"), (65534, "N/A"),
                                 (65535, "INVALID_TYPE")],
    "ENUM_HCCL_RDMA_TYPE": [(0, "RDMA_SEND_NOTIFY"), (1, "RDMA_SEND_PAYLOAD"), (255, "RESERVED"), (65534, "N/A"),
                            (65535, "INVALID_TYPE")],
}


def enum_id(table: str, name: str) -> int:
    """The id of ``name`` in one of ``ENUMS`` (its ``N/A`` id when absent)."""
    rows = {n: i for i, n in ENUMS[table]}
    return rows.get(name, rows["N/A"])
