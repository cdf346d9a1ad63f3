"""Fixtures for the acl facade tests: example models built once, facade state reset per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from openmsprof import acl
from openmsprof.acl._state import STATE
from tests.acl.helpers import EXAMPLES  # noqa: F401  (puts examples/ on sys.path)


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import models as example_models  # examples/models.py

    return example_models.save_all(tmp_path_factory.mktemp("models"))


@pytest.fixture(autouse=True)
def _acl_reset() -> Iterator[None]:
    yield
    if STATE.initialized:
        acl.finalize()
    STATE.prof_path = None
    STATE.set_configs.clear()


class Loaded:
    """A loaded model with malloc'ed input/output datasets."""

    def __init__(self, path: Path) -> None:
        self.model_id, ret = acl.mdl.load_from_file(str(path))
        assert ret == 0, acl.get_recent_err_msg()
        self.desc = acl.mdl.create_desc()
        assert acl.mdl.get_desc(self.desc, self.model_id) == 0
        self.in_sizes = [acl.mdl.get_input_size_by_index(self.desc, i)
                         for i in range(acl.mdl.get_num_inputs(self.desc))]
        self.out_sizes = [acl.mdl.get_output_size_by_index(self.desc, i)
                          for i in range(acl.mdl.get_num_outputs(self.desc))]
        self.input, self.in_ptrs = self._dataset(self.in_sizes)
        self.output, self.out_ptrs = self._dataset(self.out_sizes)
        dims, ret = acl.mdl.get_input_dims(self.desc, 0)
        self.in_shape = tuple(dims["dims"])
        dims, ret = acl.mdl.get_output_dims(self.desc, 0)
        self.out_shape = tuple(dims["dims"])

    @staticmethod
    def _dataset(sizes: list[int]) -> tuple[int, list[int]]:
        ds = acl.mdl.create_dataset()
        ptrs = []
        for size in sizes:
            ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            assert ret == 0
            _, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
            assert ret == 0
            ptrs.append(ptr)
        return ds, ptrs

    def feed(self, x: np.ndarray) -> None:
        assert acl.rt.memcpy(self.in_ptrs[0], self.in_sizes[0], acl.util.numpy_to_ptr(x), x.nbytes,
                             acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0

    def result(self) -> np.ndarray:
        return acl.util.ptr_to_numpy(self.out_ptrs[0], self.out_shape, 11).copy()

    def execute(self) -> int:
        return acl.mdl.execute(self.model_id, self.input, self.output)


@pytest.fixture
def loaded() -> type[Loaded]:
    return Loaded
