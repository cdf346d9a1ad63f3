"""``dynamic_profile``: ``init(path)`` writes a template ``profiler_config.json``; editing it (any
editor, atomic rename included) starts a collection at the next ``step()`` (or at ``start_step``)
for ``warmup + active`` steps.  A watcher thread polls the file's (mtime, size, inode) every ~2 s
and parses it; ``step()`` only reads attributes (no file I/O, no lock).  The watcher also stops a
collection whose loop stopped calling ``step()`` (wall-clock backstop).  Log: ``{path}/log/``
(200 KB, one backup).  Nothing here raises into the training loop.  Kineto can only be stopped on
the thread that started it, so the backstop halts the PROF_ job at once and closes the Kineto
window at the next ``step()`` or at interpreter exit (``atexit``).
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from openmsprof.config.errors import ConfigError
from openmsprof.config.validate import show
from openmsprof.fileio import fs
from openmsprof.recorder import held_signals as _held_signals
from openmsprof.torch.profiler import _enums
from openmsprof.torch.profiler.experimental_config import _ExperimentalConfig

CONFIG_NAME = "profiler_config.json"
MAX_CONFIG_BYTES = 1024 * 1024
TEMPLATE: dict[str, Any] = {
    "activities": ["CPU", "NPU"], "prof_dir": "./", "analyse": False, "record_shapes": False,
    "profile_memory": False, "with_stack": False, "with_flops": False, "with_modules": False, "active": 1,
    "warmup": 0, "is_rank": False, "rank_list": [], "async_mode": False, "metadata": {},
    "experimental_config": {"profiler_level": "Level0", "aic_metrics": "AiCoreNone", "l2_cache": False,
                            "op_attr": False, "gc_detect_threshold": None, "data_simplification": True,
                            "record_op_args": False, "export_type": ["text"], "mstx": False,
                            "mstx_domain_include": [], "mstx_domain_exclude": [], "host_sys": [],
                            "sys_io": False, "sys_interconnection": False},
}
_EXP_KEYS = ("profiler_level", "aic_metrics", "l2_cache", "op_attr", "gc_detect_threshold",
             "data_simplification", "record_op_args", "export_type", "msprof_tx", "mstx",
             "mstx_domain_include", "mstx_domain_exclude", "host_sys", "sys_io", "sys_interconnection")


class _PrivateRotatingHandler(logging.handlers.RotatingFileHandler):
    def _open(self) -> Any:
        stream = super()._open()
        try:
            os.chmod(self.baseFilename, fs.FILE_MODE)
        except OSError:
            pass
        return stream


class _Forward(logging.Handler):
    """Copies openmsprof warnings raised while validating into the dynamic_profile log."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__(logging.WARNING)
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        self.target.warning("%s", record.getMessage())


def _parse(raw: dict[str, Any], log: logging.Logger) -> dict[str, Any]:
    """Validate a profiler_config.json dict; bad values → defaults, each logged."""
    def get(key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        v = raw.get(key, default)
        if (isinstance(v, bool) and kind is int) or not isinstance(v, kind):
            log.warning("%s=%s is invalid; using %r", key, show(v), default)
            return default
        return v

    acts = get("activities", list, ["CPU", "NPU"])
    names = [a for a in acts if _enums.activity_name(a)]
    if len(names) != len(acts):
        log.warning("activities=%s holds unknown values; using %r", show(acts), names or ["CPU", "NPU"])
    exp_raw = get("experimental_config", dict, {})
    exp_kwargs: dict[str, Any] = {}
    for k, v in exp_raw.items():
        if k not in _EXP_KEYS:
            log.warning("experimental_config.%s is not a known key; ignored", show(k))
            continue
        if k == "aic_metrics" and isinstance(v, str):
            v = _enums.METRIC_VALUES.get(v, v)
        exp_kwargs[k] = v
    fwd = _Forward(log)
    logging.getLogger("openmsprof").addHandler(fwd)
    try:
        exp = _ExperimentalConfig(**exp_kwargs)
    except TypeError as exc:
        log.warning("experimental_config invalid (%s); using defaults", exc)
        exp = _ExperimentalConfig()
    finally:
        logging.getLogger("openmsprof").removeHandler(fwd)
    start_step = raw.get("start_step", -1)
    if isinstance(start_step, bool) or not isinstance(start_step, int) or start_step < -1:
        log.warning("start_step=%s is invalid; using -1 (next step)", show(start_step))
        start_step = -1
    return {"activities": names or ["CPU", "NPU"], "prof_dir": get("prof_dir", str, "./"),
            "analyse": get("analyse", bool, False), "async_mode": get("async_mode", bool, False),
            "record_shapes": get("record_shapes", bool, False), "profile_memory": get("profile_memory", bool, False),
            "with_stack": get("with_stack", bool, False), "with_flops": get("with_flops", bool, False),
            "with_modules": get("with_modules", bool, False), "active": max(get("active", int, 1), 1),
            "warmup": max(get("warmup", int, 0), 0), "start_step": start_step,
            "is_rank": get("is_rank", bool, False), "rank_list": get("rank_list", list, []),
            "metadata": get("metadata", dict, {}), "experimental_config": exp}


class _Monitor:
    def __init__(self, path: Path, poll_s: float, backstop_s: float) -> None:
        self.dir = path
        self.file = path / CONFIG_NAME
        self.poll_s = poll_s
        self.backstop_s = backstop_s
        self.step_num = 0
        self.last_step = time.monotonic()
        self.pending: dict[str, Any] | None = None
        self.prof: Any = None
        self.stop_at = 0
        self.expired = False
        self.saved: list[Path] = []
        self._stop_evt = threading.Event()
        logdir = fs.make_dir(path / "log")
        self.log = logging.getLogger(f"openmsprof.dynamic_profile.{id(self)}")
        self.log.propagate = False
        self.log.setLevel(logging.INFO)
        handler = _PrivateRotatingHandler(logdir / f"dp_{os.getpid()}.log", maxBytes=200 * 1024, backupCount=1)
        handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s"))
        self.log.addHandler(handler)
        self._sig = self._stat()
        self.thread = threading.Thread(target=self._run, name="openmsprof-dynamic-profile", daemon=True)
        self.thread.start()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.file)
            return (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return None

    def _run(self) -> None:
        while not self._stop_evt.wait(self.poll_s):
            try:
                sig = self._stat()
                if sig is not None and sig != self._sig:
                    self._sig = sig
                    self._load()
                prof = self.prof
                if prof is not None and not self.expired and time.monotonic() - self.last_step > self.backstop_s:
                    # Kineto must be stopped on the thread that started it: end the window at the
                    # next step() or at interpreter exit; the PROF_ job stops collecting now.
                    self.expired = True
                    self.log.warning("no step() for %.1f s (backstop): the collection ends at the next "
                                     "step() or at exit", self.backstop_s)
                    sess = getattr(prof, "_session", None)
                    if sess is not None:
                        sess.halt("dynamic_profile backstop: the training loop stopped calling step()")
            except Exception as exc:  # the watcher never dies
                self.log.error("watcher error: %s", exc)

    def _load(self) -> None:
        try:
            # a FIFO, device or symlink is refused before a blocking open; size capped at 1 MB
            raw = orjson.loads(fs.read_regular(self.file, CONFIG_NAME, MAX_CONFIG_BYTES, ConfigError))
            if not isinstance(raw, dict):
                raise ValueError("top level is not an object")
        except ConfigError as exc:
            self.log.error("%s; keeping the previous state", exc)
            return
        except (OSError, ValueError) as exc:
            self.log.error("%s is not valid JSON (%s); keeping the previous state", fs.escape(self.file), exc)
            return
        cfg = _parse(raw, self.log)
        if cfg["is_rank"]:
            from openmsprof.torch.profiler.prof_dir import get_rank

            if get_rank() not in cfg["rank_list"]:
                self.log.info("rank %d not in rank_list %r; not collecting", get_rank(), cfg["rank_list"])
                return
        if cfg["start_step"] >= 0 and cfg["start_step"] < self.step_num:
            self.log.warning("start_step %d is already past (step %d); rejected", cfg["start_step"], self.step_num)
            return
        self.log.info("config change accepted: %s", {k: v for k, v in cfg.items() if k != "experimental_config"})
        self.pending = cfg

    def step(self) -> None:
        self.step_num += 1
        self.last_step = time.monotonic()
        prof = self.prof
        if prof is not None:
            if self.step_num >= self.stop_at or self.expired:
                with _held_signals.held():  # (a Ctrl-C meanwhile comes once the collection is stopped)
                    self.prof = None
                    self.expired = False
                    self._finish(prof)
            else:
                prof.step()
        cfg = self.pending
        if cfg is not None and self.prof is None and (cfg["start_step"] < 0 or cfg["start_step"] <= self.step_num):
            self.pending = None
            with _held_signals.held():  # (... once the started collection is tracked, so step() ends it)
                self._begin(cfg)

    def _begin(self, cfg: dict[str, Any]) -> None:
        from openmsprof.torch.profiler.profile import profile, tensorboard_trace_handler
        from openmsprof.torch.profiler.scheduler import schedule

        try:
            root = Path(cfg["prof_dir"])  # seed 004: relative to the working directory
            if not root.is_absolute():
                root = Path.cwd() / root
            handler = tensorboard_trace_handler(root, analyse_flag=cfg["analyse"], async_mode=cfg["async_mode"])
            prof = profile(activities=cfg["activities"], record_shapes=cfg["record_shapes"],
                           profile_memory=cfg["profile_memory"], with_stack=cfg["with_stack"],
                           with_flops=cfg["with_flops"], with_modules=cfg["with_modules"],
                           experimental_config=cfg["experimental_config"], on_trace_ready=handler,
                           schedule=schedule(wait=0, warmup=cfg["warmup"], active=cfg["active"], repeat=1))
            prof._step_offset = self.step_num
            for k, v in cfg["metadata"].items():
                prof.add_metadata_json(str(k), orjson.dumps(v).decode())
            prof.start()
            self.stop_at = self.step_num + cfg["warmup"] + cfg["active"]
            self.prof = prof
            self.log.info("collection started at step %d for %d steps", self.step_num, cfg["warmup"] + cfg["active"])
        except Exception as exc:
            self.log.error("cannot start the collection: %s", exc)

    def _finish(self, prof: Any) -> None:
        try:
            prof.stop()
            self.saved.extend(prof.saved)
            self.log.info("collection stopped at step %d; saved %s", self.step_num, [str(p) for p in prof.saved])
        except Exception as exc:
            self.log.error("stopping the collection failed: %s", exc)

    def close(self) -> None:
        self._stop_evt.set()
        with _held_signals.held():
            prof, self.prof = self.prof, None
            if prof is not None:
                self._finish(prof)
        self.thread.join(timeout=5)
        for h in list(self.log.handlers):
            h.close()
            self.log.removeHandler(h)


_monitor: _Monitor | None = None
_atexit_registered = False


def init(path: str | os.PathLike[str], poll_interval: float = 2.0, backstop_s: float = 600.0) -> None:
    """Watch ``{path}/profiler_config.json`` (written from the template when missing)."""
    global _monitor, _atexit_registered
    try:
        from openmsprof.config.paths import resolve_output

        d = fs.make_dir(resolve_output(os.fspath(path), "dynamic_profile path"))
        cfg = d / CONFIG_NAME
        if not cfg.exists():
            fs.write_file_atomic(cfg, orjson.dumps(TEMPLATE, option=orjson.OPT_INDENT_2))
        if _monitor is not None:
            _monitor.close()
        _monitor = _Monitor(d, poll_interval, backstop_s)
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
        _monitor.log.info("dynamic_profile watching %s", cfg)
    except Exception as exc:
        logging.getLogger("openmsprof").warning("openmsprof: dynamic_profile.init(%r) failed: %s", path, exc)


def step() -> None:
    """Call once per training step.  No file I/O: a counter and two attribute tests when idle."""
    m = _monitor
    if m is not None:
        m.step()


def shutdown() -> None:
    """Stop watching (saving a running collection)."""
    global _monitor
    if _monitor is not None:
        _monitor.close()
        _monitor = None


def monitor() -> _Monitor | None:
    return _monitor
