"""State rules and bad input: documented error codes, one-line messages, the app keeps running."""

from __future__ import annotations

import numpy as np

from openmsprof import acl


def test_state_rules(out_dir):
    assert acl.prof.init(str(out_dir)) == acl.ACL_ERROR_UNINITIALIZE  # before acl.init
    assert acl.finalize() == acl.ACL_ERROR_UNINITIALIZE
    assert acl.init() == 0
    assert acl.init() == acl.ACL_ERROR_REPEAT_INITIALIZE
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, acl.ACL_PROF_ACL_API)
    assert cfg != 0
    assert acl.prof.start(cfg) == acl.ACL_ERROR_UNINITIALIZE  # before prof.init
    assert acl.prof.stop(cfg) == acl.ACL_ERROR_UNINITIALIZE
    assert acl.prof.finalize() == acl.ACL_ERROR_UNINITIALIZE
    assert acl.prof.init(str(out_dir)) == 0
    assert acl.prof.init(str(out_dir)) == acl.ACL_ERROR_REPEAT_INITIALIZE
    assert acl.prof.stop(cfg) == acl.ACL_ERROR_PROF_NOT_RUN
    assert acl.prof.start(cfg) == 0
    assert acl.prof.start(cfg) == acl.ACL_ERROR_PROF_ALREADY_RUN
    assert acl.prof.destroy_config(cfg) == acl.ACL_ERROR_INVALID_PARAM  # in use
    assert acl.prof.stop(12345) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.prof.stop(cfg) == 0
    assert acl.prof.stop(cfg) == acl.ACL_ERROR_PROF_NOT_RUN
    assert acl.prof.finalize() == 0
    msg = acl.get_recent_err_msg()
    assert msg and "\n" not in msg


def test_bad_configs_and_set_config(out_dir):
    assert acl.init() == 0
    assert acl.prof.create_config([0], acl.ACL_AICORE_NONE, 0, 1 << 40) == 0  # unknown bit
    assert "0x10000000000" in acl.get_recent_err_msg()
    assert acl.prof.create_config([0], 77, 0, acl.ACL_PROF_ACL_API) == 0
    assert acl.prof.start(0) == acl.ACL_ERROR_UNINITIALIZE
    assert acl.prof.init("bad\npath") != 0
    assert acl.prof.init(str(out_dir)) == 0
    assert acl.prof.set_config(acl.ACL_PROF_STORAGE_LIMIT, "10MB") != 0  # documented range starts at 200 MB
    assert acl.prof.set_config(acl.ACL_PROF_STORAGE_LIMIT, "abcMB") != 0
    assert acl.prof.set_config(99, "x") == acl.ACL_ERROR_INVALID_PARAM
    assert acl.prof.set_config(acl.ACL_PROF_HOST_SYS_USAGE, "cpu,mem") == 0
    assert acl.prof.start(999) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.prof.finalize() == 0


def test_model_faults(models, loaded, tmp_path):
    assert acl.mdl.load_from_file(str(models["tiny_mlp"]))[1] == acl.ACL_ERROR_UNINITIALIZE
    assert acl.init() == 0
    mid, ret = acl.mdl.load_from_file(str(tmp_path / "missing.onnx"))
    assert (mid, ret) == (0, acl.ACL_ERROR_READ_MODEL_FAILURE)
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage" * 50)
    mid, ret = acl.mdl.load_from_file(str(corrupt))
    assert (mid, ret) == (0, acl.ACL_ERROR_PARSE_MODEL)
    assert str(corrupt) in acl.get_recent_err_msg()
    m = loaded(models["tiny_mlp"])
    assert acl.mdl.execute(424242, m.input, m.output) == acl.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.execute(m.model_id, 777, m.output) == acl.ACL_ERROR_INVALID_PARAM
    # wrong input size (shape)
    small = acl.mdl.create_dataset()
    p, _ = acl.rt.malloc(8, 0)
    acl.mdl.add_dataset_buffer(small, acl.create_data_buffer(p, 8))
    assert acl.mdl.execute(m.model_id, small, m.output) == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert "needs 64 bytes" in acl.get_recent_err_msg()
    # wrong dtype: an int32 array of the right byte size
    wrong = np.zeros(m.in_shape, np.int32)
    ds = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(acl.util.numpy_to_ptr(wrong), wrong.nbytes))
    assert acl.mdl.execute(m.model_id, ds, m.output) == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH
    assert "int32" in acl.get_recent_err_msg()
    # a pointer that is not memory we know: error, no crash
    bogus = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(bogus, acl.create_data_buffer(0x1000, m.in_sizes[0]))
    assert acl.mdl.execute(m.model_id, bogus, m.output) == acl.ACL_ERROR_INVALID_PARAM
    # freed memory is detected (binding cache invalidated)
    assert m.execute() == 0
    assert acl.rt.free(m.in_ptrs[0]) == 0
    assert m.execute() == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free(m.in_ptrs[0]) == acl.ACL_ERROR_INVALID_PARAM
    # execute on an unloaded model
    assert acl.mdl.unload(m.model_id) == 0
    assert m.execute() == acl.ACL_ERROR_INVALID_MODEL_ID
    assert acl.mdl.unload(m.model_id) == acl.ACL_ERROR_INVALID_MODEL_ID


def test_runtime_and_util_faults():
    assert acl.rt.set_device(5) != 0
    assert acl.rt.set_context(999) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.malloc(0, 0)[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy(0x10, 8, 0x20, 8, 0) == acl.ACL_ERROR_INVALID_PARAM
    a, _ = acl.rt.malloc(16, 0)
    b, _ = acl.rt.malloc(16, 0)
    assert acl.rt.memcpy(a, 16, b, 32, 0) == acl.ACL_ERROR_INVALID_PARAM  # count > dest_max
    assert acl.rt.memset(b, 16, 7, 16) == 0
    assert acl.rt.memcpy(a, 16, b, 16, 0) == 0
    assert bytes(acl.util.ptr_to_bytes(a, 16)) == b"\x07" * 16
    try:
        acl.util.ptr_to_numpy(0x1234, (4,), 11)
        raise AssertionError("unknown pointer accepted")
    except ValueError as exc:
        assert "not known memory" in str(exc)
    assert acl.util.stop_thread(999) == acl.ACL_ERROR_INVALID_PARAM


def test_execute_async_and_streams(models, loaded):
    assert acl.init() == 0
    m = loaded(models["tiny_mlp"])
    x = np.random.default_rng(1).random(m.in_shape, dtype=np.float32)
    m.feed(x)
    stream, ret = acl.rt.create_stream()
    assert ret == 0
    assert acl.mdl.execute_async(m.model_id, m.input, m.output, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    y = m.result()
    assert acl.mdl.execute(m.model_id, m.input, m.output) == 0
    np.testing.assert_array_equal(y, m.result())
    bad = acl.mdl.create_dataset()
    assert acl.mdl.execute_async(m.model_id, bad, m.output, stream) == 0  # queued
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_MODEL_INPUT_NOT_MATCH  # reported here
    assert acl.mdl.execute_async(m.model_id, m.input, m.output, 31337) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.destroy_stream(stream) == 0
