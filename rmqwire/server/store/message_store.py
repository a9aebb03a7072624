"""The message store (Java ``DefaultMessageStore``): commit log + consume queues + flush, recovery
and retention, behind the calls the broker processors make.

Threads: puts and gets run in the caller's thread (a Twisted reactor is fine: an append is a memory
copy into the page cache). Flushing runs in its own thread (``flush.py``), and a scheduler thread
flushes consume queues and the checkpoint and runs retention. SYNC_FLUSH puts return a
``concurrent.futures.Future`` completed from the flush thread; or, when a reactor was given with
the flush listener (the broker), from the reactor, which reads the answers of a flush helper
process (``flush_helper.py``) that makes the commit log durable.

Dispatch (Java ``ReputMessageService``): each appended record is queued and, once it is below the
confirm offset (written for ASYNC_FLUSH, flushed for SYNC_FLUSH), handed to the dispatchers: the
consume-queue builder first, then any added with ``add_dispatcher``, then the arrival listeners
(long polling). With ASYNC_FLUSH this happens in the putting thread before the put returns; with
SYNC_FLUSH in the flush thread (or on the reactor, with the flush helper), so a listener must not
assume the reactor thread (``reactor.callFromThread``).

Nothing here imports Twisted or networking code (the reactor is passed in and duck-typed).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import datetime
import fcntl
import functools
import logging
import os
import resource
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from rmqwire.codec.java import now_ms as java_now_ms
from rmqwire.codec.message import (
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MAX_PROPERTIES_LENGTH,
    MessageExt,
    MessageSysFlag,
    PropertyKey,
    body_crc32,
    decode_message,
    decode_properties,
    encode_message,
    encode_properties,
)
from rmqwire.errors import CodecError, MessageDecodeError
from rmqwire.server.store.checkpoint import StoreCheckpoint
from rmqwire.server.store.commitlog import (
    SCHEDULE_TOPIC,
    CommitLog,
    PendingRecords,
    tags_code_of,
    tags_hash_cached,
)
from rmqwire.server.store.config import (
    CQ_STORE_UNIT_SIZE,
    MessageStoreConfig,
    parse_delay_levels,
    total_physical_memory,
)
from rmqwire.server.store.consume_queue import BoundaryType, ConsumeQueue
from rmqwire.server.store.filter import MessageFilter
from rmqwire.server.store.flush import (
    FlushDiskWatcher,
    FlushListener,
    FlushRealTimeService,
    GroupCommitRequest,
    GroupCommitService,
    ServiceThread,
)
from rmqwire.server.store.flush_helper import HelperGroupCommitService, ReactorLike
from rmqwire.server.store.index_service import IndexService
from rmqwire.server.store.mapped_file import StoreLoadError
from rmqwire.server.store.recovery import (
    RecoveryReport,
    recover_commit_log,
    recover_consume_queues,
)
from rmqwire.server.store.results import (
    AppendMessageStatus,
    DispatchBatch,
    DispatchRequest,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)
from rmqwire.server.store.retention import (
    CleanCommitLogService,
    RunningFlags,
    disk_partition_used_ratio,
)
from rmqwire.server.store.stats import StoreStats

__all__ = ["DefaultMessageStore"]

log = logging.getLogger(__name__)

#: Java ``DefaultMessageStore.MAX_PULL_MSG_SIZE``.
MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
#: Java's checkBeforePutMessage: non-retry topics up to Byte.MAX_VALUE bytes, any up to 255.
_MAX_TOPIC_BYTES = 127
_MAX_TOPIC_BYTES_ANY = 255
_RETRY_PREFIX = "%RETRY%"
_TRAN_MASK = 0xC
_TRAN_NOT = 0x0
_TRAN_COMMIT = 0x8
_BORN_V6 = int(MessageSysFlag.BORNHOST_V6)
_STORE_V6 = int(MessageSysFlag.STOREHOSTADDRESS_V6)
#: Java ``ConsumeQueueExt.MAX_ADDR``: tags codes at or below it are extension addresses.
_EXT_MAX_ADDR = -(2**31) - 1

ArrivalListener = Callable[[DispatchRequest], None]
#: Called once for a whole batch put instead of the record listener once per record.
BatchArrivalListener = Callable[[DispatchBatch], None]
Dispatcher = Callable[[DispatchRequest], None]
#: Java ``PutMessageHook.executeBeforePutMessage``: may rewrite the message (a delay level, a timer
#: message) or refuse it with a result.
PutMessageHook = Callable[[MessageExt], "PutMessageResult | None"]


_PutOutcome = PutMessageResult | concurrent.futures.Future[PutMessageResult] | GroupCommitRequest


def _as_future(r: _PutOutcome) -> concurrent.futures.Future[PutMessageResult]:
    if isinstance(r, concurrent.futures.Future):
        return r
    assert isinstance(r, PutMessageResult)  # listened requests come from put_listened only
    f: concurrent.futures.Future[PutMessageResult] = concurrent.futures.Future()
    f.set_result(r)
    return f


def _raise_open_files_limit() -> None:
    # Every mapped segment holds a descriptor (Python's mmap keeps a duplicate before 3.13):
    # thousands of queues need more than the usual soft limit of 1024, as Java brokers do.
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.warning("cannot raise the open files limit: %s", e)


def _lock_byte_zero(fd: int) -> None:
    ofd = getattr(fcntl, "F_OFD_SETLK", None)
    if ofd is None:  # not Linux: a classic POSIX lock
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        return
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), native layout
    fcntl.fcntl(fd, ofd, struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))


def _is_safe_name(topic: str) -> bool:
    # The store uses topics as directory names: never let one climb out of consumequeue/.
    return bool(topic) and topic not in (".", "..") and "/" not in topic and "\\" not in topic and "\0" not in topic


class _Scheduler(ServiceThread):
    """Periodic store chores: consume-queue + checkpoint flush every second, retention every
    ``cleanResourceInterval`` (first run after a minute, as Java), TPS sampling."""

    name = "StoreScheduler"

    def __init__(self, store: DefaultMessageStore, clock: Callable[[], float]) -> None:
        super().__init__()
        self._store = store
        self._clock = clock

    def run(self) -> None:
        cfg = self._store.config
        start = self._clock()
        next_clean = start + 60.0
        next_thorough = start + cfg.flush_consume_queue_thorough_interval / 1000.0
        interval = min(1.0, cfg.flush_interval_consume_queue / 1000.0)
        while not self._stopped.wait(interval):
            now = self._clock()
            try:
                self._store.stats.sample()
                thorough = now >= next_thorough
                if thorough:
                    next_thorough = now + cfg.flush_consume_queue_thorough_interval / 1000.0
                self._store.flush_consume_queues(0 if thorough else cfg.flush_consume_queue_least_pages)
                if now >= next_clean:
                    next_clean = now + cfg.clean_resource_interval / 1000.0
                    self._store.run_retention()
            except Exception:
                log.exception("store scheduler task failed")


class DefaultMessageStore:
    """Open with ``load()`` (recovery), then ``start()``; ``shutdown()`` leaves a clean store."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        now_ms: Callable[[], int] = java_now_ms,
        sync: Callable[[int], None] = os.fdatasync,
        disk_usage: Callable[[str], float] = disk_partition_used_ratio,
        local_now: Callable[[], datetime.datetime] = datetime.datetime.now,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``now_ms`` is the store clock (store timestamps, retention), ``sync`` makes a file
        durable (``os.fdatasync``), ``disk_usage(path)`` the used fraction of a partition,
        ``clock`` the monotonic clock for flush deadlines; tests replace them."""
        config.validate()
        self.config = config
        self._now_ms = now_ms
        self._sync = sync
        self._clock = clock
        self.delay_levels = parse_delay_levels(config.message_delay_level)
        self.commit_log = CommitLog(config, sync)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.running_flags = RunningFlags()
        self.stats = StoreStats(now_ms)
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service = IndexService(config, now_ms=now_ms, sync=sync)
        self.recovery_report: RecoveryReport | None = None
        self.clean_commit_log_service = CleanCommitLogService(
            config,
            self.running_flags,
            self._delete_expired_commit_log,
            disk_usage=disk_usage,
            now_ms=now_ms,
            local_now=local_now,
        )
        self._memory_for_hot_data = total_physical_memory() * config.access_message_in_memory_max_ratio // 100

        self._put_lock = threading.Lock()
        # Re-entrant: a dispatcher or listener may put a message itself (e.g. a schedule service).
        self._dispatch_lock = threading.RLock()
        self._cq_lock = threading.Lock()
        self._topic_queue_table: dict[tuple[str, int], int] = {}
        self._pending: collections.deque[DispatchRequest | DispatchBatch] = collections.deque()
        self._reput_offset = 0
        self._last_dispatched_store_ts = 0
        self._last_clean_min_offset = 0
        self._dispatchers: list[Dispatcher] = [self._build_consume_queue, self._build_index]
        self._added_dispatchers: list[Dispatcher] = []
        self._arrival_listeners: list[tuple[ArrivalListener, BatchArrivalListener | None]] = []
        self._put_hooks: list[PutMessageHook] = []

        self._lock_fd = -1
        self._loaded = False
        self._shutdown = True
        self._group_commit: GroupCommitService | HelperGroupCommitService | None = None
        self._flush_listener: FlushListener | None = None
        self._flush_reactor: ReactorLike | None = None
        self._reactor_flush_listener: FlushListener | None = None
        self._flush_watcher: FlushDiskWatcher | None = None
        self._flush_real_time: FlushRealTimeService | None = None
        self._scheduler: _Scheduler | None = None

    # ---------------------------------------------------------------------------------- lifecycle

    def load(self) -> RecoveryReport:
        """Lock the directory, map every file and recover (normal or abnormal)."""
        cfg = self.config
        cfg.root_dir.mkdir(parents=True, exist_ok=True)
        _raise_open_files_limit()
        self._acquire_lock()
        try:
            abnormal = cfg.abort_path.exists()
            log.info("store %s: last shutdown %s", cfg.root_dir, "abnormal" if abnormal else "normal")
            self.commit_log.load()
            self._load_consume_queues()
            self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
            self.index_service.load(not abnormal, self.checkpoint)
            queues = list(self._all_consume_queues())
            max_phy_cq = recover_consume_queues(queues)
            report = recover_commit_log(
                self.commit_log,
                self.checkpoint,
                abnormal=abnormal,
                max_phy_offset_of_consume_queue=max_phy_cq,
                dispatch=self._run_dispatchers,  # no arrival listeners: nobody waits yet
                truncate_consume_queues=self._truncate_consume_queues,
                destroy_consume_queues=self._destroy_consume_queues,
                check_crc=cfg.check_crc_on_recover,
                delay_levels=self.delay_levels,
                message_index_safe=cfg.message_index_enable and cfg.message_index_safe,
            )
            self._recover_topic_queue_table()
            self._reput_offset = self.commit_log.max_offset
        except BaseException:
            self._close_files()
            self._release_lock()
            raise
        self.recovery_report = report
        self._loaded = True
        return report

    def start(self) -> None:
        """Write the abort marker and start the flush and housekeeping threads."""
        if not self._loaded:
            raise RuntimeError("load() the store before start()")
        if not self._shutdown:
            return
        self._write_abort_file()
        cfg = self.config
        if cfg.is_sync_flush:
            self._flush_watcher = FlushDiskWatcher(self._clock, lambda: self._flush_listener)
            reactor, listener = self._flush_reactor, self._reactor_flush_listener
            # An IReactorFDSet reads the helper's answers; a replaced sync (tests) needs this process.
            if (reactor is not None and listener is not None and self._sync is os.fdatasync
                    and hasattr(reactor, "addReader")):
                self._group_commit = HelperGroupCommitService(
                    self.commit_log.mapped_file_queue, self._after_commit_log_flush, listener, reactor,
                    self._in_process_group_commit)
            else:
                self._group_commit = self._in_process_group_commit()
            self._flush_watcher.start()
            self._group_commit.start()
        else:
            self._flush_real_time = FlushRealTimeService(
                self._flush_commit_log,
                self._after_commit_log_flush,
                interval_ms=cfg.flush_interval_commit_log,
                least_pages=cfg.flush_commit_log_least_pages,
                thorough_interval_ms=cfg.flush_commit_log_thorough_interval,
                clock=self._clock,
            )
            self._flush_real_time.start()
        self._scheduler = _Scheduler(self, self._clock)
        self._scheduler.start()
        self._shutdown = False

    def _in_process_group_commit(self) -> GroupCommitService:
        return GroupCommitService(self._flush_all_commit_log, self._after_commit_log_flush,
                                  listener=lambda: self._flush_listener)

    def shutdown(self) -> None:
        """Flush everything, dispatch what is left, persist the checkpoint and remove the abort
        marker: the next ``load`` takes the normal recovery path."""
        if not self._loaded:
            return
        self._shutdown = True
        with self._put_lock:  # no append is half-way through
            pass
        for service in (self._scheduler, self._group_commit, self._flush_real_time, self._flush_watcher):
            if service is not None:
                service.shutdown()
        self._scheduler = self._group_commit = self._flush_real_time = self._flush_watcher = None
        self.commit_log.mapped_file_queue.flush_all()
        self._drain_dispatch(self.commit_log.max_offset)
        self.flush_consume_queues(0)
        self.index_service.shutdown()
        if self.checkpoint is not None:
            ts = self.commit_log.mapped_file_queue.store_timestamp
            if ts > 0:
                self.checkpoint.physic_msg_timestamp = ts
            self.checkpoint.close()
            self.checkpoint = None
        if self.running_flags.is_writeable and self.dispatch_behind_bytes == 0:
            try:
                self.config.abort_path.unlink()
            except FileNotFoundError:
                pass
        self._close_files()
        self._release_lock()
        self._loaded = False

    def abandon(self) -> None:
        """Let go of the directory the way a killed process would: no final flush, dispatch or
        checkpoint, the abort marker stays (for crash tests in one process)."""
        self._shutdown = True
        if isinstance(self._group_commit, HelperGroupCommitService):
            self._group_commit.abandon()
        for service in (self._scheduler, self._group_commit, self._flush_real_time, self._flush_watcher):
            if service is not None:
                service._stopped.set()
                service.wakeup()
        for service in (self._scheduler, self._group_commit, self._flush_real_time, self._flush_watcher):
            if service is not None and service._thread is not None:
                service._thread.join(10)
        self._scheduler = self._group_commit = self._flush_real_time = self._flush_watcher = None
        self._pending.clear()
        self.index_service.close()
        if self.checkpoint is not None:
            self.checkpoint.close(flush=False)
            self.checkpoint = None
        self._close_files()
        self._release_lock()
        self._loaded = False

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown

    def _acquire_lock(self) -> None:
        # A write lock on byte 0 of ``lock``, as Java's FileChannel.tryLock(0, 1, false). An
        # open-file-description lock conflicts with Java's POSIX lock in another process and with
        # a second store opened in this process, and closing some other descriptor of the file
        # does not drop it (a classic POSIX lock would be lost on any close in the process).
        fd = os.open(self.config.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            _lock_byte_zero(fd)
        except OSError:
            os.close(fd)
            raise StoreLoadError(f"{self.config.root_dir} is locked by another running store") from None
        os.pwrite(fd, b"lock", 0)
        os.fsync(fd)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor drops the record lock
            self._lock_fd = -1

    def _write_abort_file(self) -> None:
        path = self.config.abort_path
        if path.exists():  # Java keeps the previous content as abort.bak
            Path(str(path) + ".bak").write_bytes(path.read_bytes())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, str(os.getpid()).encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def _close_files(self) -> None:
        self.index_service.close()
        self.commit_log.close()
        for cq in self._all_consume_queues():
            cq.close()
        self.consume_queue_table = {}
        if self.checkpoint is not None:
            self.checkpoint.close(flush=False)
            self.checkpoint = None

    # ------------------------------------------------------------------------- consume queues

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        if not root.is_dir():
            return
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                try:
                    qid = int(qdir.name)
                except ValueError:
                    continue
                cq = ConsumeQueue(
                    topic_dir.name, qid, root, self.config.mapped_file_size_consume_queue, self._sync
                )
                cq.load()
                self.consume_queue_table.setdefault(topic_dir.name, {})[qid] = cq

    def _all_consume_queues(self) -> Iterable[ConsumeQueue]:
        for queues in list(self.consume_queue_table.values()):
            yield from list(queues.values())

    def find_consume_queue(self, topic: str, queue_id: int, *, create: bool = True) -> ConsumeQueue | None:
        queues = self.consume_queue_table.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        if cq is not None or not create:
            return cq
        if not _is_safe_name(topic):
            return None
        with self._cq_lock:
            queues = self.consume_queue_table.setdefault(topic, {})
            cq = queues.get(queue_id)
            if cq is None:
                cq = ConsumeQueue(
                    topic,
                    queue_id,
                    self.config.consume_queue_dir,
                    self.config.mapped_file_size_consume_queue,
                    self._sync,
                )
                queues[queue_id] = cq
            return cq

    def _truncate_consume_queues(self, phy_offset: int) -> None:
        for cq in self._all_consume_queues():
            cq.truncate_dirty_logic_files(phy_offset)

    def _destroy_consume_queues(self) -> None:
        for cq in self._all_consume_queues():
            cq.destroy()
        self.consume_queue_table = {}

    def _recover_topic_queue_table(self) -> None:
        """Next queue offsets come from the consume queues (Java ``recoverTopicQueueTable``)."""
        table = {}
        min_phy = self.commit_log.min_offset
        for cq in self._all_consume_queues():
            table[(cq.topic, cq.queue_id)] = cq.max_offset_in_queue
            cq.correct_min_offset(min_phy)
        self._topic_queue_table = table

    def flush_consume_queues(self, least_pages: int) -> None:
        """Flush the consume queues; a full flush (0 pages) also advances and persists the
        checkpoint's consume-queue time, which is only safe once their data is on disk."""
        logics_ts = self._last_dispatched_store_ts
        physic_ts = self.commit_log.mapped_file_queue.store_timestamp
        for cq in self._all_consume_queues():
            cq.flush(least_pages)
        cp = self.checkpoint
        if cp is None:
            return
        if least_pages == 0 and logics_ts > 0:
            cp.logics_msg_timestamp = logics_ts
        if physic_ts > 0:
            cp.physic_msg_timestamp = physic_ts
        try:
            cp.flush()
        except (OSError, ValueError) as e:
            log.error("checkpoint flush failed: %s", e)

    # ---------------------------------------------------------------------------------- dispatch

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        """Run ``dispatcher`` for every record after the consume-queue builder (Java
        ``addDispatcher``: an index, a timer...). Called in order, one record at a time."""
        self._dispatchers.append(dispatcher)
        self._added_dispatchers.append(dispatcher)

    def add_arrival_listener(self, listener: ArrivalListener,
                             batch_listener: BatchArrivalListener | None = None) -> None:
        """Called after each dispatched record (Java ``MessageArrivingListener``): the queue
        ``(topic, queue_id)`` now has max offset ``consume_queue_offset + 1``. May run in the flush
        thread; exceptions are logged and ignored. With ``batch_listener``, the records of a batch
        put are reported to it in one call instead."""
        self._arrival_listeners.append((listener, batch_listener))

    def add_put_hook(self, hook: PutMessageHook) -> None:
        """Run ``hook`` on every single-message put after the store's own refusals (Java
        ``putMessageHookList``); a result it returns is the put's result."""
        self._put_hooks.append(hook)

    def _build_consume_queue(self, req: DispatchRequest) -> None:
        tran = req.sys_flag & _TRAN_MASK
        if tran != _TRAN_NOT and tran != _TRAN_COMMIT:
            return
        if not self.running_flags.is_cq_writeable:
            return
        cq = self.find_consume_queue(req.topic, req.queue_id)
        if cq is None:
            log.error("record at %d has an unusable topic %r: not queued", req.commit_log_offset, req.topic)
            return
        for _ in range(3):
            if cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code, req.consume_queue_offset):
                self._last_dispatched_store_ts = req.store_timestamp
                return
        log.error("consume queue %s-%d cannot be written: store marked logics-queue error", req.topic, req.queue_id)
        self.running_flags.make_logics_queue_error()

    def _build_index(self, req: DispatchRequest) -> None:
        if self.config.message_index_enable:
            self.index_service.build_index(req)

    def _run_dispatchers(self, req: DispatchRequest) -> None:
        for d in self._dispatchers:
            d(req)

    def _do_dispatch(self, req: DispatchRequest) -> None:
        for d in self._dispatchers:
            d(req)
        if self.config.long_polling_enable:
            for listener, _ in self._arrival_listeners:
                try:
                    listener(req)
                except Exception:
                    log.exception("message arrival listener failed")

    def _dispatch_batch(self, batch: DispatchBatch) -> None:
        if self._added_dispatchers:  # they see one record at a time, in order, as documented
            for req in batch.requests():
                self._do_dispatch(req)
            return
        self._build_consume_queue_batch(batch)
        if self.config.message_index_enable:
            self.index_service.build_index_batch(batch)
        if self.config.long_polling_enable:
            requests = None
            for listener, batch_listener in self._arrival_listeners:
                try:
                    if batch_listener is not None:
                        batch_listener(batch)
                        continue
                    if requests is None:
                        requests = batch.requests()
                    for req in requests:
                        listener(req)
                except Exception:
                    log.exception("message arrival listener failed")

    def _build_consume_queue_batch(self, batch: DispatchBatch) -> None:
        tran = batch.sys_flag & _TRAN_MASK
        if tran != _TRAN_NOT and tran != _TRAN_COMMIT:
            return
        if not self.running_flags.is_cq_writeable:
            return
        cq = self.find_consume_queue(batch.topic, batch.queue_id)
        if cq is None:
            log.error("batch at %d has an unusable topic %r: not queued", batch.commit_log_offset, batch.topic)
            return
        for _ in range(3):
            if cq.put_batch_position_info(batch.commit_log_offsets, batch.sizes, batch.tags_codes,
                                          batch.first_queue_offset):
                self._last_dispatched_store_ts = batch.store_timestamp
                return
        log.error("consume queue %s-%d cannot be written: store marked logics-queue error", batch.topic,
                  batch.queue_id)
        self.running_flags.make_logics_queue_error()

    @property
    def confirm_offset(self) -> int:
        """Records below this offset may be dispatched: flushed ones for SYNC_FLUSH, all others."""
        if self.config.is_sync_flush:
            return self.commit_log.flushed_where
        return self.commit_log.max_offset

    def _drain_dispatch(self, confirm: int | None = None) -> None:
        limit = self.confirm_offset if confirm is None else confirm
        with self._dispatch_lock:
            pending = self._pending
            while pending:
                req = pending[0]
                end = req.commit_log_offset + req.msg_size
                if end > limit:
                    break
                pending.popleft()
                try:
                    if type(req) is DispatchBatch:
                        self._dispatch_batch(req)
                    else:
                        self._do_dispatch(req)
                except Exception:
                    log.exception("dispatch of the record at %d failed", req.commit_log_offset)
                self._reput_offset = end

    @property
    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.max_offset - self._reput_offset) if self._pending else 0

    # ------------------------------------------------------------------------------------ flush

    def _flush_commit_log(self, least_pages: int) -> int:
        mfq = self.commit_log.mapped_file_queue
        mfq.flush(least_pages)
        return mfq.flushed_where

    def _flush_all_commit_log(self) -> int:
        return self.commit_log.mapped_file_queue.flush_all()

    def _after_commit_log_flush(self, flushed: int) -> None:
        if self.config.is_sync_flush:
            self._drain_dispatch(flushed)

    def flush(self) -> int:
        """Flush the commit log now (all files); returns the flushed offset."""
        flushed = self._flush_all_commit_log()
        self._after_commit_log_flush(flushed)
        return flushed

    # -------------------------------------------------------------------------------------- put

    def check_before_put(self, msg: MessageExt) -> PutMessageResult | None:
        """The store-side refusals of Java's ``HookUtils.checkBeforePutMessage``."""
        if self._shutdown:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        if not self.running_flags.is_writeable:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        topic = msg.topic or ""
        n = len(topic.encode("utf-8", "surrogatepass"))
        if (not topic.startswith(_RETRY_PREFIX) and n > _MAX_TOPIC_BYTES) or n > _MAX_TOPIC_BYTES_ANY:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if not _is_safe_name(topic) or msg.body is None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if self.is_os_page_cache_busy():
            return PutMessageResult(PutMessageStatus.OS_PAGE_CACHE_BUSY)
        return None

    def is_os_page_cache_busy(self) -> bool:
        begin = self.commit_log.begin_time_in_lock
        if not begin:
            return False
        diff = self._now_ms() - begin
        return self.config.os_page_cache_busy_time_out_mills < diff < 10_000_000

    def put_message(self, msg: MessageExt, *, hooks: bool = True) -> PutMessageResult:
        """Append one message and wait for its flush if SYNC_FLUSH asks for it (Java
        ``putMessage``); on a reactor thread use ``async_put_message``."""
        return self._wait(self._put_message(msg, hooks=hooks))

    def put_messages(self, batch: MessageExt) -> PutMessageResult:
        """``async_put_messages`` and wait."""
        return self._wait(self._put_messages(batch))

    def async_put_message(self, msg: MessageExt, *, hooks: bool = True,
                          wait_store: bool | None = None) -> concurrent.futures.Future[PutMessageResult]:
        """Append one message now; the future completes at once (ASYNC_FLUSH, or WAIT=false) or
        when a flush covers it (SYNC_FLUSH), from the flush thread.

        ``hooks=False`` skips the put hooks (a broker re-putting a message whose record keeps its
        DELAY property, as Java's schedule service does); ``wait_store`` overrides the WAIT
        property (Java's ``setWaitStoreMsgOK`` after the record's properties were fixed)."""
        return _as_future(self._put_message(msg, hooks=hooks, wait_store=wait_store))

    def async_put_messages(self, batch: MessageExt) -> concurrent.futures.Future[PutMessageResult]:
        """Append a SEND_BATCH_MESSAGE body (``batch.body``) as one record per inner message.

        As RocketMQ 5.3.3, every record carries its own properties followed by the batch's
        properties (``batch.properties``, e.g. its UNIQ_KEY and CLUSTER): where a key is in both,
        readers see the batch's value. All records get one store timestamp and consecutive queue
        offsets, and move to the next file together.
        """
        return _as_future(self._put_messages(batch))

    def set_flush_listener(self, listener: FlushListener | None, *, reactor: ReactorLike | None = None) -> None:
        """Where SYNC_FLUSH completions of ``put_listened`` go: one call per group-commit round
        (and per timed-out request) from the flush or watcher thread, with each completed
        request and its status (PUT_OK once a flush covered it, or FLUSH_DISK_TIMEOUT). The
        listener may see a request twice (flushed, and timed out meanwhile): the first counts.

        With ``reactor`` (a Twisted reactor; set before ``start``) the listener is called on the
        reactor thread only, and SYNC_FLUSH flushes in a helper process whose answers the
        reactor reads (``flush_helper``): completions need no thread hand-off."""
        if reactor is None or listener is None:
            self._flush_listener = listener
            self._flush_reactor = self._reactor_flush_listener = None
            return
        self._flush_listener = lambda done: reactor.callFromThread(listener, done)
        self._flush_reactor, self._reactor_flush_listener = reactor, listener

    def put_listened(self, msg: MessageExt, *, batch: bool = False) -> PutMessageResult | GroupCommitRequest:
        """``async_put_message`` (``async_put_messages`` with ``batch``) without a Future: the
        result now, or, when a SYNC_FLUSH writer must wait and a flush listener is set, the
        waiting request (its ``result`` is the PUT_OK one; set its ``token`` before returning to
        the thread that the listener hands completions to)."""
        r = self._put_messages(msg, listened=True) if batch else self._put_message(msg, listened=True)
        if isinstance(r, concurrent.futures.Future):  # no listener: wait here
            return self._wait(r)
        return r

    def _wait(self, r: _PutOutcome) -> PutMessageResult:
        if isinstance(r, PutMessageResult):
            return r
        assert isinstance(r, concurrent.futures.Future)
        try:
            return r.result(timeout=self.config.sync_flush_timeout / 1000.0 + 5.0)
        except concurrent.futures.TimeoutError:
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR)

    def _put_message(self, msg: MessageExt, *, hooks: bool = True, wait_store: bool | None = None,
                     listened: bool = False) -> _PutOutcome:
        """The append; a Future only when a SYNC_FLUSH writer must wait for the disk.

        ``msg`` is the broker's inner message and is updated as Java updates it: sysFlag host bits,
        BODYCRC, queue and commit-log offsets and the store timestamp. Its properties dict is
        written in its own order.
        """
        refused = self.check_before_put(msg)
        if refused is not None:
            return self._failed(refused)
        if hooks:
            for hook in self._put_hooks:
                refused = hook(msg)
                if refused is not None:
                    return self._failed(refused)
        body = msg.body or b""
        if len(body) > self.config.max_message_size:
            return self._failed(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
        if msg.topic == SCHEDULE_TOPIC:
            # Its tags code is computed from DELAY; a record whose DELAY does not parse would stop
            # every later recovery (Java's check fails on it), so it is never written.
            try:
                tags_code_of(msg.topic, msg.properties, 0, self.delay_levels)
            except ValueError:
                return self._failed(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
        sys_flag = msg.sys_flag
        sys_flag = (sys_flag | _BORN_V6) if ":" in msg.born_host[0] else (sys_flag & ~_BORN_V6)
        sys_flag = (sys_flag | _STORE_V6) if ":" in msg.store_host[0] else (sys_flag & ~_STORE_V6)
        msg.sys_flag = sys_flag
        msg.body_crc = body_crc32(body)
        msg.queue_offset = msg.commit_log_offset = msg.store_timestamp = 0
        msg.magic = None if self.config.auto_message_version_on_topic_len else MAGIC_CODE_V1
        try:
            record = encode_message(msg)
        except CodecError as e:
            status = PutMessageStatus.MESSAGE_ILLEGAL
            if "properties" in str(e) and str(MAX_PROPERTIES_LENGTH) in str(e):
                status = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            return self._failed(PutMessageResult(status))
        if len(record) > self.config.max_message_size + 64 * 1024:
            return self._failed(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
        pending = PendingRecords(record, (len(record),), sys_flag, [])
        wait = msg.wait_store_msg_ok if wait_store is None else wait_store
        return self._append(msg, pending, [msg.properties], wait, listened=listened)

    def _put_messages(self, batch: MessageExt, *, listened: bool = False) -> _PutOutcome:
        refused = self.check_before_put(batch)
        if refused is not None:
            return self._failed(refused)
        if batch.sys_flag & _TRAN_MASK != _TRAN_NOT or batch.delay_time_level > 0 or batch.topic == SCHEDULE_TOPIC:
            return self._failed(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
        body = batch.body or b""
        if len(body) > self.config.max_message_size:
            return self._failed(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
        sys_flag = batch.sys_flag
        sys_flag = (sys_flag | _BORN_V6) if ":" in batch.born_host[0] else (sys_flag & ~_BORN_V6)
        sys_flag = (sys_flag | _STORE_V6) if ":" in batch.store_host[0] else (sys_flag & ~_STORE_V6)
        batch.sys_flag = sys_flag
        try:
            encoded = encode_batch_records(batch, sys_flag)
        except (CodecError, ValueError) as e:
            status = PutMessageStatus.MESSAGE_ILLEGAL
            if isinstance(e, CodecError) and "properties" in str(e):
                status = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            log.warning("batch refused: %s", e)
            return self._failed(PutMessageResult(status))
        if not encoded.sizes:
            return self._failed(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
        return self._append(batch, PendingRecords(encoded.data, encoded.sizes, sys_flag, []), [],
                            batch.wait_store_msg_ok, batch=encoded, listened=listened)

    def _failed(self, result: PutMessageResult) -> PutMessageResult:
        self.stats.put_message_failed_times += 1
        return result

    def _append(
        self,
        msg: MessageExt,
        pending: PendingRecords,
        properties: list[dict[str, str]],
        wait_store: bool,
        *,
        batch: EncodedBatch | None = None,
        listened: bool = False,
    ) -> _PutOutcome:
        """``properties``: each record's map; with ``batch`` (the records of a SEND_BATCH_MESSAGE)
        none, the records are queued for dispatch as one ``DispatchBatch``."""
        topic, queue_id = msg.topic, msg.queue_id
        tran = pending.sys_flag & _TRAN_MASK
        queued = tran == _TRAN_NOT or tran == _TRAN_COMMIT
        n = len(pending.sizes)
        begin = self._now_ms()
        with self._put_lock:
            now = self._now_ms()
            self.commit_log.begin_time_in_lock = now
            key = (topic, queue_id)
            first_q = self._topic_queue_table.get(key, 0) if queued else 0
            result = self.commit_log.append(pending, first_q, now, msg.store_host)
            if result.status is not AppendMessageStatus.PUT_OK:
                self.commit_log.begin_time_in_lock = 0
                status = {
                    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
                    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
                }.get(result.status, PutMessageStatus.UNKNOWN_ERROR)
                if result.status is AppendMessageStatus.UNKNOWN_ERROR:
                    status = PutMessageStatus.CREATE_MAPPED_FILE_FAILED
                return self._failed(PutMessageResult(status, result))
            if queued:
                self._topic_queue_table[key] = first_q + n
            if batch is not None:
                self._pending.append(
                    DispatchBatch(topic, queue_id, pending.sys_flag, now, first_q if queued else 0,
                                  result.record_offsets, pending.sizes, batch.tags_codes, batch.keys,
                                  batch.uniq_keys, batch.raw_properties, commit_log_offset=result.wrote_offset,
                                  msg_size=result.wrote_bytes)
                )
            else:
                q = first_q
                for off, size, props in zip(result.record_offsets, pending.sizes, properties, strict=True):
                    self._pending.append(
                        DispatchRequest(
                            msg_size=size,
                            success=True,
                            topic=topic,
                            queue_id=queue_id,
                            commit_log_offset=off,
                            tags_code=tags_code_of(topic, props, now, self.delay_levels),
                            store_timestamp=now,
                            consume_queue_offset=q if queued else 0,
                            keys=props.get(PropertyKey.KEYS, ""),
                            uniq_key=props.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                            sys_flag=pending.sys_flag,
                            prepared_transaction_offset=msg.prepared_transaction_offset if n == 1 else 0,
                            properties=props,
                        )
                    )
                    q += 1
            self.commit_log.begin_time_in_lock = 0
        msg.store_timestamp = now
        msg.commit_log_offset = result.wrote_offset
        msg.queue_offset = result.logics_offset
        self.stats.record_put(n, result.wrote_bytes, self._now_ms() - begin)
        if not self.config.is_sync_flush:
            self._drain_dispatch()
        return self._handle_disk_flush(PutMessageResult(PutMessageStatus.PUT_OK, result), wait_store,
                                       listened)

    def _handle_disk_flush(self, put_result: PutMessageResult, wait_store: bool,
                           listened: bool = False) -> _PutOutcome:
        service = self._group_commit
        if service is None:  # ASYNC_FLUSH: the periodic flush takes care of it
            return put_result
        if not wait_store:
            service.wakeup()
            return put_result
        append = put_result.append_result
        assert append is not None
        req = GroupCommitRequest(
            append.wrote_offset + append.wrote_bytes, self.config.sync_flush_timeout, put_result, self._clock,
            listened=listened and self._flush_listener is not None,
        )
        if self._flush_watcher is not None:
            self._flush_watcher.add(req)
        service.put_request(req)
        return req if req.future is None else req.future

    # -------------------------------------------------------------------------------------- get

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        max_total_msg_size: int = MAX_PULL_MSG_SIZE,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult | None:
        """Read up to ``max_msg_nums`` records of a queue from ``offset`` (Java ``getMessage``).

        None when the store is shut down or not readable (the broker answers SYSTEM_ERROR). A queue
        the store has never seen reads as an empty one.
        """
        if self._shutdown or not self.running_flags.is_readable:
            return None
        begin = self._now_ms()
        result = GetMessageResult(next_begin_offset=offset)
        status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        next_begin = offset
        min_offset = max_offset = 0
        max_offset_py = self.commit_log.max_offset
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            next_begin = 0
        else:
            min_offset = cq.min_offset_in_queue
            max_offset = cq.max_offset_in_queue
            if max_offset == 0:
                next_begin = 0
            elif offset < min_offset:
                status = GetMessageStatus.OFFSET_TOO_SMALL
                next_begin = min_offset
            elif offset == max_offset:
                status = GetMessageStatus.OFFSET_OVERFLOW_ONE
                next_begin = offset
            elif offset > max_offset:
                status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
                next_begin = max_offset
            else:
                status, next_begin = self._read_queue(
                    cq, offset, max_offset, max_msg_nums, max_total_msg_size, message_filter, max_offset_py, result
                )
        stats = self.stats
        if status is GetMessageStatus.FOUND:
            stats.get_message_times_total_found += 1
            stats.get_message_transferred_msg_count += result.message_count
        else:
            stats.get_message_times_total_miss += 1
        stats.get_message_entire_time_max = max(stats.get_message_entire_time_max, self._now_ms() - begin)
        result.status = status
        result.next_begin_offset = next_begin
        result.min_offset = min_offset
        result.max_offset = max_offset
        return result

    def _read_queue(
        self,
        cq: ConsumeQueue,
        offset: int,
        max_offset: int,
        max_msg_nums: int,
        max_total_msg_size: int,
        message_filter: MessageFilter | None,
        max_offset_py: int,
        result: GetMessageResult,
    ) -> tuple[GetMessageStatus, int]:
        cfg = self.config
        max_filter_bytes = max(cfg.max_filter_message_size, max_msg_nums * CQ_STORE_UNIT_SIZE)
        max_pull = min(max(max_total_msg_size, 100), MAX_PULL_MSG_SIZE)
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        next_begin = offset
        max_phy_pulling = 0
        files_travelled = 0
        memory = self._memory_for_hot_data
        while (
            result.buffer_total_size <= 0
            and next_begin < max_offset
            and files_travelled < cfg.travel_cq_file_num_when_get_message
        ):
            files_travelled += 1
            units = cq.iterate_from(next_begin)
            if units is None:
                status = GetMessageStatus.OFFSET_FOUND_NULL
                next_begin = cq.roll_next_file(next_begin)
                log.warning(
                    "%s-%d: offset %d in [%d, %d) is not readable, next begin %d",
                    cq.topic, cq.queue_id, offset, cq.min_offset_in_queue, max_offset, next_begin,
                )
                break
            next_phy_file_start: int | None = None
            for unit in units:
                if next_begin >= max_offset:
                    break
                offset_py, size_py = unit.pos, unit.size
                in_mem = max_offset_py - offset_py <= memory
                if (unit.queue_offset - offset) * CQ_STORE_UNIT_SIZE >= max_filter_bytes:
                    break
                if self._is_the_batch_full(size_py, unit.batch_num, max_msg_nums, max_pull, result, in_mem):
                    break
                if result.buffer_total_size >= max_pull:
                    break
                max_phy_pulling = offset_py
                next_begin = unit.queue_offset + unit.batch_num
                if next_phy_file_start is not None and offset_py < next_phy_file_start:
                    continue
                tags = unit.tags_code if unit.tags_code > _EXT_MAX_ADDR else None
                if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags):
                    if result.buffer_total_size == 0:
                        status = GetMessageStatus.NO_MATCHED_MESSAGE
                    continue
                record = self.commit_log.get_message(offset_py, size_py)
                if record is None:
                    if result.buffer_total_size == 0:
                        status = GetMessageStatus.MESSAGE_WAS_REMOVING
                    next_phy_file_start = self.commit_log.roll_next_file(offset_py)
                    continue
                if message_filter is not None and not message_filter.is_matched_by_commit_log(record):
                    if result.buffer_total_size == 0:
                        status = GetMessageStatus.NO_MATCHED_MESSAGE
                    result.filter_message_count += 1
                    continue
                result.add_message(record, unit.queue_offset, unit.batch_num)
                status = GetMessageStatus.FOUND
                next_phy_file_start = None
        result.suggest_pulling_from_slave = max_offset_py - max_phy_pulling > memory
        return status, next_begin

    def _is_the_batch_full(
        self, size_py: int, batch_num: int, max_msg_nums: int, max_size: int, result: GetMessageResult, in_mem: bool
    ) -> bool:
        total, count = result.buffer_total_size, result.message_count
        if total == 0 or count == 0:
            return False
        if count + batch_num > max_msg_nums or total + size_py > max_size:
            return True
        cfg = self.config
        if in_mem:
            if total + size_py > cfg.max_transfer_bytes_on_message_in_memory:
                return True
            return count > cfg.max_transfer_count_on_message_in_memory - 1
        if total + size_py > cfg.max_transfer_bytes_on_message_in_disk:
            return True
        return count > cfg.max_transfer_count_on_message_in_disk - 1

    # -------------------------------------------------------------------------------- queries

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.max_offset_in_queue if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.min_offset_in_queue if cq is not None else 0

    def get_message_total_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.message_total_in_queue if cq is not None else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get(consume_queue_offset) if cq is not None else None
        return unit.pos if unit is not None else 0

    def get_offset_in_queue_by_time(
        self, topic: str, queue_id: int, timestamp: int, boundary: BoundaryType = BoundaryType.LOWER
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: a queue offset by store time, clamped to [min, max]."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return 0
        found = cq.offset_in_queue_by_time(
            timestamp, boundary, self.commit_log.pickup_store_timestamp, self.commit_log.min_offset
        )
        return min(max(found, cq.min_offset_in_queue), cq.max_offset_in_queue)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the queue's first message, -1 if none (GET_EARLIEST_MSG_STORETIME)."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        unit = cq.earliest_unit() if cq is not None else None
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit.pos, unit.size)

    def get_earliest_message_time_in_store(self) -> int:
        """Store time of the first record in the commit log, -1 if none."""
        first = self.commit_log.min_offset
        if first < 0:
            return -1
        size = self.commit_log.message_size_at(first)
        if size is None or size <= 0:
            return -1
        return self.commit_log.pickup_store_timestamp(first, size)

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get(consume_queue_offset) if cq is not None else None
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit.pos, unit.size)

    def select_one_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        """The raw record at a commit-log offset (VIEW_MESSAGE_BY_ID), None if not stored."""
        if size is None:
            size = self.commit_log.message_size_at(commit_log_offset)
            if size is None or size <= 0:
                return None
        return self.commit_log.get_message(commit_log_offset, size)

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """The decoded record at a commit-log offset (body left compressed, as Java)."""
        raw = self.select_one_message_by_offset(commit_log_offset)
        if raw is None:
            return None
        try:
            return decode_message(raw, decompress=False)
        except MessageDecodeError:
            return None

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Records indexed under ``topic#key`` stored in [begin, end] ms, oldest first (Java
        ``queryMessage``). When none of the offsets found is readable any more, asks again
        (up to 3 times) for older ones, before the first offset's store time."""
        result = QueryMessageResult()
        last_query_time = end
        for _ in range(3):
            found = self.index_service.query_offset(topic, key, max_num, begin, last_query_time)
            if not found.phy_offsets:
                break
            result.index_last_update_timestamp = found.index_last_update_timestamp
            result.index_last_update_phyoffset = found.index_last_update_phyoffset
            for i, offset in enumerate(sorted(found.phy_offsets)):
                record = self.select_one_message_by_offset(offset)
                if record is None:
                    continue
                if i == 0:
                    last_query_time = self.commit_log.pickup_store_timestamp(offset, len(record))
                result.message_buffers.append(record)
            if result.message_buffers or last_query_time < begin:
                break
        return result

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def topics(self) -> list[str]:
        return sorted(self.consume_queue_table)

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(self.consume_queue_table.get(topic, {}))

    def runtime_info(self) -> dict[str, str]:
        info = self.stats.runtime_info()
        ratio = self.clean_commit_log_service.commit_log_ratio()
        # Java lists each commit-log path's ratio, then the minimum (one path here).
        info[f"commitLogDiskRatio_{self.config.commit_log_dir}"] = str(ratio)
        info["commitLogDiskRatio"] = str(ratio)
        info["consumeQueueDiskRatio"] = str(self.clean_commit_log_service.consume_queue_ratio())
        info["commitLogMinOffset"] = str(self.min_phy_offset)
        info["commitLogMaxOffset"] = str(self.max_phy_offset)
        return info

    # ------------------------------------------------------------------------------- retention

    def _delete_expired_commit_log(self, expired_ms: int, now_ms: int, clean_immediately: bool, batch_max: int) -> int:
        return self.commit_log.mapped_file_queue.delete_expired_by_time(expired_ms, now_ms, clean_immediately, batch_max)

    def run_retention(self) -> int:
        """One round of retention (the scheduler calls it every cleanResourceInterval): expired
        commit-log files, then consume-queue files pointing below the new minimum. Returns the
        number of commit-log files deleted."""
        deleted = self.clean_commit_log_service.run().deleted_files
        self.clean_consume_queues()
        return deleted

    def execute_delete_files_manually(self) -> None:
        self.clean_commit_log_service.execute_delete_files_manually()

    def clean_consume_queues(self) -> None:
        min_offset = self.commit_log.min_offset
        if min_offset > self._last_clean_min_offset:
            self._last_clean_min_offset = min_offset
            for cq in self._all_consume_queues():
                cq.delete_expired_file(min_offset)
            self.index_service.delete_expired_file(min_offset)

    def clean_expired_consumer_queue(self) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE (Java ``cleanExpiredConsumerQueue``): drop every consume
        queue file that points below the commit log's minimum offset, now."""
        min_offset = self.commit_log.min_offset
        for cq in self._all_consume_queues():
            cq.delete_expired_file(min_offset)
        self._last_clean_min_offset = max(self._last_clean_min_offset, min_offset)

    def delete_topics(self, topics: Iterable[str]) -> int:
        """Drop the consume queues of ``topics`` (DELETE_TOPIC_IN_BROKER); commit-log records stay
        until retention. Returns how many topics had queues."""
        count = 0
        for topic in topics:
            with self._cq_lock:
                queues = self.consume_queue_table.pop(topic, None)
            if queues is None:
                continue
            count += 1
            for cq in queues.values():
                cq.destroy()
                self._topic_queue_table.pop((topic, cq.queue_id), None)
            try:
                (self.config.consume_queue_dir / topic).rmdir()
            except OSError:
                pass
        return count


# ---- batch encoding -------------------------------------------------------------------------------

_BATCH_HEAD = struct.Struct(">iiiii")  # TOTALSIZE MAGIC BODYCRC FLAG BODYLEN
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_REC_HEAD = struct.Struct(">iiiiiqqiq")
_PROPERTY_SEPARATOR = 0x02


def _host_bytes(host: tuple[str, int]) -> bytes:
    ip, port = host
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        packed = socket.inet_pton(family, ip)
    except OSError:
        raise ValueError(f"bad host address {ip!r}") from None
    if not 0 <= int(port) <= 0xFFFF:
        raise ValueError(f"bad port {port!r}")
    return packed + struct.pack(">i", int(port))


@dataclasses.dataclass(slots=True)
class EncodedBatch:
    """A SEND_BATCH_MESSAGE body as stored records, and what dispatch needs of each record."""

    data: bytes
    sizes: list[int]
    tags_codes: list[int]
    keys: list[str]
    uniq_keys: list[str | None]
    raw_properties: list[bytes]


#: The framed names of the properties dispatch reads: a record whose properties bytes hold none of
#: them (as ASCII, which no invalid UTF-8 can hide) has none of these keys.
_TAGS_KEY = PropertyKey.TAGS.encode() + b"\x01"
_KEYS_KEY = PropertyKey.KEYS.encode() + b"\x01"
_UNIQ_KEY = PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode() + b"\x01"


def encode_batch_records(batch: MessageExt, sys_flag: int) -> EncodedBatch:
    """Turn a SEND_BATCH_MESSAGE body into stored records (Java ``MessageExtEncoder.encode(batch)``).

    Each inner message keeps its raw properties bytes; the batch's properties string follows,
    after a separator when the inner ones do not end with one. Queue offset, physical offset and
    store time are left 0 for the append to fill in. Raises ValueError on a malformed body.

    Tags code, KEYS and UNIQ_KEY of each record are those of ``decode_properties`` over its whole
    properties string: the batch's part is read once, and wins for a key it holds (last pair
    wins); an inner part is parsed only when it holds one of the keys the batch's does not.
    """
    body = batch.body or b""
    topic = batch.topic.encode("utf-8")
    magic = MAGIC_CODE_V2 if len(topic) > 127 else MAGIC_CODE_V1
    topic_field = (_I16.pack(len(topic)) if magic == MAGIC_CODE_V2 else bytes([len(topic)])) + topic
    batch_props = encode_properties(batch.properties).encode("utf-8")
    if len(batch_props) > MAX_PROPERTIES_LENGTH:
        raise CodecError(f"batch properties of {len(batch_props)} bytes exceed {MAX_PROPERTIES_LENGTH}")
    born = _host_bytes(batch.born_host)
    store = _host_bytes(batch.store_host)
    if bool(sys_flag & _BORN_V6) != (len(born) == 20) or bool(sys_flag & _STORE_V6) != (len(store) == 20):
        raise ValueError("host address family does not match sysFlag")
    # Same for every record of the batch: hosts, store time (0: the append sets it), reconsume
    # times, transaction offset (batches carry none); one pack writes them with the head and the
    # body length.
    middle = born + b"\0" * 8 + store + struct.pack(">iq", batch.reconsume_times, 0)
    pack_head = _rec_head_with(len(middle)).pack
    fixed_size = _REC_HEAD.size + len(middle) + 4 + len(topic_field) + 2
    queue_id, born_ts = batch.queue_id, batch.born_timestamp
    pack_i16 = _I16.pack
    crc32 = zlib.crc32
    sep_batch = b"\x02" + batch_props
    # The batch's own pairs come last in every record: they decide where they are present.
    batch_map = decode_properties(batch_props.decode("utf-8", "replace"))
    b_tags = batch_map.get(PropertyKey.TAGS)
    b_keys = batch_map.get(PropertyKey.KEYS)
    b_uniq = batch_map.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    b_tags_code = tags_hash_cached(b_tags) if b_tags else 0
    parts: list[bytes] = []
    add = parts.append
    sizes: list[int] = []
    tags_codes: list[int] = []
    keys_out: list[str] = []
    uniq_out: list[str | None] = []
    raw_out: list[bytes] = []
    pos, n = 0, len(body)
    while pos < n:
        if n - pos < _BATCH_HEAD.size + 2:
            raise ValueError(f"truncated batch entry at {pos}")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
        end = pos + total
        p = pos + _BATCH_HEAD.size
        if total < _BATCH_HEAD.size + 2 or end > n or body_len < 0 or p + body_len + 2 > end:
            raise ValueError(f"malformed batch entry at {pos}")
        inner_body = body[p : p + body_len]
        p += body_len
        (props_len,) = _I16.unpack_from(body, p)
        p += 2
        if props_len < 0 or p + props_len != end:
            raise ValueError(f"malformed batch entry properties at {pos}")
        inner_props = body[p:end]
        if props_len > 0 and batch_props and inner_props[-1] != _PROPERTY_SEPARATOR:
            props = inner_props + sep_batch
        else:
            props = inner_props + batch_props
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise CodecError(f"properties of {len(props)} bytes exceed {MAX_PROPERTIES_LENGTH}")
        size = fixed_size + body_len + len(props)
        add(pack_head(size, magic, crc32(inner_body) & 0x7FFFFFFF, queue_id, flag, 0, 0, sys_flag, born_ts, middle,
                      body_len))  # BODYCRC as body_crc32, without a call per record
        add(inner_body)
        add(topic_field)
        add(pack_i16(len(props)))
        add(props)
        sizes.append(size)
        raw_out.append(props)
        tags, keys, uniq = b_tags, b_keys, b_uniq
        if props_len and (
            (b_tags is None and _TAGS_KEY in inner_props)
            or (b_keys is None and _KEYS_KEY in inner_props)
            or (b_uniq is None and _UNIQ_KEY in inner_props)
        ):
            inner_map = decode_properties(inner_props.decode("utf-8", "replace"))
            if tags is None:
                tags = inner_map.get(PropertyKey.TAGS)
            if keys is None:
                keys = inner_map.get(PropertyKey.KEYS)
            if uniq is None:
                uniq = inner_map.get(PropertyKey.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            tags_codes.append(tags_hash_cached(tags) if tags else 0)
        else:
            tags_codes.append(b_tags_code)
        keys_out.append(keys or "")
        uniq_out.append(uniq)
        pos = end
    return EncodedBatch(b"".join(parts), sizes, tags_codes, keys_out, uniq_out, raw_out)


@functools.lru_cache(maxsize=4)
def _rec_head_with(middle_len: int) -> struct.Struct:
    """The record head, the per-batch constant middle (IPv4 or IPv6 hosts) and BODYLEN."""
    return struct.Struct(f">iiiiiqqiq{middle_len}si")
