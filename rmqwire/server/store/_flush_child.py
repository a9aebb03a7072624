"""The flush helper process (spawned by ``flush_helper.FlushHelper``; run by path, stdlib only, so it
starts in milliseconds and needs no package on its path).

It holds its own descriptors of the commit-log files (passed over the socket) and ``fdatasync``\\ s
them when told a target offset; it answers with the offset every byte below which is now on disk.
All targets read before a flush are served by that one flush (a group commit). It exits when the
broker's end of the socket closes (the broker exited or was killed: EOF), so it never outlives it.

Messages on the Unix stream socket (``MSG``) (network byte order):
  broker -> helper  b"F" start:q size:q  + one descriptor: a commit-log file covering [start, start+size)
                    b"T" target:q 0:q     flush everything below target
  helper -> broker  b"D" flushed:q errno:q   done: everything below ``flushed`` is on disk; or, with
                    errno != 0, the flush up to ``flushed`` failed (nothing new is promised)
"""

import array
import errno
import os
import signal
import socket
import struct
import sys

MSG = struct.Struct(">cqq")
_READ = 64 * 1024
_MAX_FDS = 64


def serve(sock: socket.socket, flushed: int) -> None:
    files: list[tuple[int, int, int]] = []  # (start, end, fd), ascending
    fds: list[int] = []  # received, not yet claimed by their b"F" message (it may come in pieces)
    partial = b""
    ancillary = socket.CMSG_SPACE(_MAX_FDS * array.array("i").itemsize)
    while True:
        target = -1
        flags = 0  # the first read waits; then everything already queued joins this round
        while True:
            try:
                data, anc, _flags, _addr = sock.recvmsg(_READ, ancillary, flags)
            except BlockingIOError:
                break
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    got = array.array("i")
                    got.frombytes(raw[: len(raw) - len(raw) % got.itemsize])
                    fds.extend(got)
            if not data:
                return  # the broker is gone
            flags = socket.MSG_DONTWAIT
            if partial:
                data, partial = partial + data, b""
            end = len(data) - len(data) % MSG.size
            partial = data[end:]
            for kind, a, b in MSG.iter_unpack(data[:end]):
                if kind == b"F":
                    files.append((a, a + b, fds.pop(0)))
                    files.sort()
                elif kind == b"T":
                    target = max(target, a)
            if not anc and len(data) < _READ and not partial:
                break  # all that was queued (a read stops after a descriptor, so read on then)
        if target < 0:
            continue
        if target <= flushed:
            sock.sendall(MSG.pack(b"D", flushed, 0))
            continue
        err = 0
        for start, end, fd in files:
            if end > flushed and start < target:
                try:
                    os.fdatasync(fd)
                except OSError as e:
                    err = e.errno or errno.EIO
                    break
        if err:
            sock.sendall(MSG.pack(b"D", target, err))
            continue
        flushed = target
        # Files wholly below the flushed offset are done with (the last one stays: it may grow).
        while len(files) > 1 and files[0][1] <= flushed:
            os.close(files.pop(0)[2])
        sock.sendall(MSG.pack(b"D", flushed, 0))


def main() -> None:
    # Its life is the broker's socket: a terminal's ^C or a group's SIGTERM must not end it while
    # the broker still counts on it (the broker flushes itself at shutdown and then closes it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(sock, int(sys.argv[2]))
    except (BrokenPipeError, ConnectionResetError):
        pass


if __name__ == "__main__":
    main()
