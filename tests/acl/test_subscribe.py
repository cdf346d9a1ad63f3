"""Subscription: op records through the user's pipe, accessors on real memory, pipe faults."""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from openmsprof import acl
from openmsprof.sources.subscription import OP_DESC_SIZE


def _reader(args: list) -> None:
    """The seed's reader: read N records at a time, decode from the numpy_to_ptr pointer."""
    fd, got = args
    size, ret = acl.prof.get_op_desc_size()
    assert ret == 0 and size == OP_DESC_SIZE
    while True:
        data = os.read(fd, size * 10)
        if len(data) == 0:
            break
        np_data = np.array(data)
        ptr = acl.util.numpy_to_ptr(np_data)
        n_bytes = np_data.itemsize * np_data.size
        n, ret = acl.prof.get_op_num(ptr, n_bytes)
        assert ret == 0
        for i in range(n):
            op_type, r1 = acl.prof.get_op_type(ptr, n_bytes, i, 65)
            op_name, r2 = acl.prof.get_op_name(ptr, n_bytes, i, 275)
            assert r1 == r2 == 0
            got.append((acl.prof.get_model_id(ptr, n_bytes, i), op_type, op_name,
                        acl.prof.get_op_start(ptr, n_bytes, i), acl.prof.get_op_end(ptr, n_bytes, i),
                        acl.prof.get_op_duration(ptr, n_bytes, i)))


def _subscribed(models, loaded, name="resnet_mish"):
    assert acl.init() == 0
    m = loaded(models[name])
    m.feed(np.ones(m.in_shape, np.float32))
    r, w = os.pipe()
    cfg = acl.prof.create_subscribe_config(1, acl.ACL_AICORE_NONE, w)
    assert cfg != 0
    assert acl.prof.model_subscribe(m.model_id, cfg) == 0
    return m, r, w, cfg


def test_reader_gets_every_op_of_every_execute_in_order(models, loaded):
    m, r, _w, cfg = _subscribed(models, loaded)
    got: list = []
    tid, ret = acl.util.start_thread(_reader, [r, got])
    assert ret == 0
    n = 4
    for _ in range(n):
        assert m.execute() == 0
    model = acl.mdl.models()[m.model_id]
    assert acl.prof.model_un_subscribe(m.model_id) == 0
    assert acl.util.stop_thread(tid) == 0
    os.close(r)
    assert acl.prof.destroy_subscribe_config(cfg) == 0
    assert len(got) % n == 0 and got
    per = len(got) // n
    names = [g[2] for g in got[:per]]
    for k in range(n):  # same ops, same order, every execute
        assert [g[2] for g in got[k * per:(k + 1) * per]] == names
    starts = [g[3] for g in got]
    assert starts == sorted(starts)
    assert all(g[0] == m.model_id and g[4] - g[3] == g[5] >= 0 for g in got)
    assert {"Conv", "Softplus", "Tanh"} <= {g[1] for g in got}
    assert model.writer is None and model.mode == 0  # back to the plain session


def test_records_reach_reader_within_one_execute(models, loaded):
    m, r, _w, _cfg = _subscribed(models, loaded, "tiny_mlp")
    assert m.execute() == 0
    data = os.read(r, 1 << 16)  # already there when execute returned
    assert len(data) > 0 and len(data) % OP_DESC_SIZE == 0
    assert acl.prof.model_un_subscribe(m.model_id) == 0
    assert os.read(r, 10) == b""  # unsubscribe closed the write end: reader sees EOF
    os.close(r)


def test_accessors_reject_bad_pointers_lengths_indexes(models, loaded):
    m, r, _w, _cfg = _subscribed(models, loaded, "tiny_mlp")
    assert m.execute() == 0
    data = os.read(r, 1 << 16)
    arr = np.frombuffer(data, dtype=np.uint8).copy()
    ptr = acl.util.numpy_to_ptr(arr)
    n, ret = acl.prof.get_op_num(ptr, arr.size)
    assert ret == 0 and n == arr.size // OP_DESC_SIZE
    name, ret = acl.prof.get_op_name(ptr, arr.size, 0, 4)
    full, _ = acl.prof.get_op_name(ptr, arr.size, 0, 257)
    assert ret == 0 and name == full[:3] and len(full) > 3
    ln, ret = acl.prof.get_op_name_len(ptr, arr.size, 0)
    assert ret == 0 and ln == len(full) + 1
    bad = acl.ACL_ERROR_INVALID_PARAM
    assert acl.prof.get_op_num(ptr, arr.size - 1)[1] == bad  # not whole records
    assert acl.prof.get_op_num(ptr, arr.size + 80)[1] == bad  # past the array
    assert acl.prof.get_op_num(12345, 80)[1] == bad  # unknown pointer: no crash
    assert acl.prof.get_op_num(0, 80)[1] == bad
    assert acl.prof.get_op_type(ptr, arr.size, n, 65)[1] == bad  # index out of range
    assert acl.prof.get_op_type(ptr, arr.size, -1, 65)[1] == bad
    assert acl.prof.get_op_type(ptr, arr.size, 0, 0)[1] == bad  # zero-length buffer
    assert acl.prof.get_op_start(ptr, arr.size, n) == 0
    assert acl.prof.get_op_num(b"\0" * 80, 80) == (1, 0)
    assert acl.prof.get_op_type(b"\0" * 80, 80, 0, 65)[1] == bad  # bad signature
    assert acl.prof.get_op_duration(bytes(arr), arr.size, 0) == acl.prof.get_op_duration(ptr, arr.size, 0)
    acl.prof.model_un_subscribe(m.model_id)
    os.close(r)


def test_closed_pipe_is_tolerated(models, loaded):
    m, r, _w, _cfg = _subscribed(models, loaded, "tiny_mlp")
    os.close(r)  # the reader went away
    for _ in range(3):
        assert m.execute() == 0
    assert acl.prof.dropped_records() > 0
    assert acl.prof.model_un_subscribe(m.model_id) == 0


def test_subscriber_that_stops_reading_never_blocks_execute(models, loaded):
    m, r, _w, _cfg = _subscribed(models, loaded, "resnet_mish")
    t0 = time.monotonic()
    n = 0
    while acl.prof.dropped_records() == 0 and n < 2000:  # fill the pipe (nobody reads)
        assert m.execute() == 0
        n += 1
    assert acl.prof.dropped_records() > 0
    t1 = time.monotonic()
    for _ in range(20):  # once behind, executes do not wait for the pipe
        assert m.execute() == 0
    behind = time.monotonic() - t1
    per = (t1 - t0) / n  # one execute while the pipe still took records, on this machine now
    # at most 50 ms of waiting per execute, on top of three times the execute's own time (a busy
    # machine slows both phases alike); a blocking write would hang here
    assert behind < 20 * (0.05 + 3 * per) + 2.0, (behind, per)
    assert t1 - t0 < 120
    # the records that did get through are whole records
    data = b""
    while True:
        try:
            os.set_blocking(r, False)
            chunk = os.read(r, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    assert len(data) % OP_DESC_SIZE == 0 and len(data) > 0
    acl.prof.model_un_subscribe(m.model_id)
    os.close(r)


def test_subscription_conflicts_with_prof_init(models, loaded, out_dir):
    m, r, _w, cfg = _subscribed(models, loaded, "tiny_mlp")
    assert acl.prof.init(str(out_dir)) == acl.ACL_ERROR_PROF_API_CONFLICT
    assert acl.prof.model_subscribe(m.model_id, cfg) == acl.ACL_ERROR_PROF_REPEAT_SUBSCRIBE
    assert m.execute() == 0  # the application goes on
    assert acl.prof.model_un_subscribe(m.model_id) == 0
    os.close(r)
    assert acl.prof.init(str(out_dir)) == 0
    r2, w2 = os.pipe()
    cfg2 = acl.prof.create_subscribe_config(1, acl.ACL_AICORE_NONE, w2)
    assert acl.prof.model_subscribe(m.model_id, cfg2) == acl.ACL_ERROR_PROF_API_CONFLICT
    assert acl.prof.finalize() == 0
    os.close(r2)
    os.close(w2)
    assert acl.prof.create_subscribe_config(1, acl.ACL_AICORE_NONE, -1) == 0
    assert acl.prof.create_subscribe_config(7, acl.ACL_AICORE_NONE, 1) == 0
    assert acl.prof.model_subscribe(999, cfg2) == acl.ACL_ERROR_INVALID_MODEL_ID


def test_concurrent_threads_reader(models, loaded):
    """A reader thread keeps up with executes from two threads."""
    m, r, _w, _cfg = _subscribed(models, loaded, "tiny_mlp")
    got: list = []
    th = threading.Thread(target=_reader, args=([r, got],))
    th.start()
    for _ in range(10):
        assert m.execute() == 0
    acl.prof.model_un_subscribe(m.model_id)
    th.join(10)
    os.close(r)
    assert len(got) > 0 and len(got) % 10 == 0


def test_every_execute_delivers_its_records_before_returning(models, loaded):
    """Back-to-back executes (spare sessions swapped in): each one's records are already in the
    pipe when it returns, the same ops every time, with times inside the execute."""
    m, r, _w, _cfg = _subscribed(models, loaded, "resnet_leakyrelu")
    os.set_blocking(r, False)
    counts = []
    for _ in range(6):
        t0 = time.time_ns() // 1000
        assert m.execute() == 0
        t1 = time.time_ns() // 1000
        data = os.read(r, 1 << 20)  # non-blocking: raises if nothing was written yet
        counts.append(len(data) // OP_DESC_SIZE)
        assert len(data) % OP_DESC_SIZE == 0
        recs = [acl.prof.get_op_start(data, len(data), i) for i in range(counts[-1])]
        assert recs == sorted(recs) and t0 - 20_000 <= recs[0] and recs[-1] <= t1 + 20_000  # µs, two clocks
    assert len(set(counts)) == 1 and counts[0] > 5
    assert acl.prof.model_un_subscribe(m.model_id) == 0
    os.close(r)
