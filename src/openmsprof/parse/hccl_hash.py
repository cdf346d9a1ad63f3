"""HCCL's group-name hash: the ``@{group}`` suffix of communication op keys (``hcom_allReduce__…@{hash}``),
computed by the ascend_pt export and matched to ``parallel_group_info`` ids by the cluster views."""

from __future__ import annotations

__all__ = ["double_hash"]


def double_hash(text: str) -> int:
    """HCCL's group-name hash: two 32-bit polynomial hashes (×29, ×131) combined as (h29 << 32) | h131."""
    h29 = h131 = 0
    for ch in text:
        h29 = (h29 * 29 + ord(ch)) & 0xFFFFFFFF
        h131 = (h131 * 131 + ord(ch)) & 0xFFFFFFFF
    return (h29 << 32) | h131
