package io.regmem.registration.uring;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.nio.file.Path;

/**
 * A file opened by an {@link IoRing}, and with {@link Mode#REGISTERED} put in the ring's fixed-file
 * table, so that each operation on it skips the kernel's file-descriptor lookup. Made by
 * {@link IoRing#openFile(Path, Mode...)}; used and closed on the ring's owner thread.
 *
 * <p>A file opened with {@link Mode#DIRECT} ({@code O_DIRECT}) bypasses the page cache: every
 * operation's memory address, length and file offset must be multiples of
 * {@link #memoryAlignment()} and {@link #offsetAlignment()} (the file system's
 * {@code STATX_DIOALIGN}), which the ring checks before it submits anything.
 */
public final class IoFile implements AutoCloseable {

    /** How a file is opened. */
    public enum Mode {
        /** Open for reading ({@code O_RDONLY}, or {@code O_RDWR} with {@link #WRITE}). */
        READ,
        /** Open for writing ({@code O_WRONLY}, or {@code O_RDWR} with {@link #READ}). */
        WRITE,
        /** Create the file if it does not exist ({@code O_CREAT}, mode 0644). */
        CREATE,
        /** Truncate it to zero length ({@code O_TRUNC}). */
        TRUNCATE,
        /** Bypass the page cache ({@code O_DIRECT}); operations must be aligned. */
        DIRECT,
        /** Each write reaches the device before it completes ({@code O_DSYNC}). */
        DSYNC,
        /**
         * Register the descriptor in the ring's fixed-file table ({@code IOSQE_FIXED_FILE}): saves
         * the kernel's descriptor lookup per operation, which pays off with many threads sharing a
         * descriptor table; measured 5-10% fewer O_DIRECT 4 KiB reads per second on Linux 6.18 here
         * (fio's {@code --registerfiles} shows the same), so it is not the default.
         */
        REGISTERED
    }

    final IoRing ring;
    final int fd;
    final int index;
    /** What an SQE's fd field carries: the table index for a registered file, else the descriptor. */
    final int sqeFd;
    /** The SQE flags for it: {@code IOSQE_FIXED_FILE} for a registered file. */
    final byte sqeFlags;
    final boolean direct;
    final boolean readable;
    final boolean writable;
    final int memoryAlignment;
    final int offsetAlignment;
    private final Path path;
    boolean closed;

    IoFile(IoRing ring, Path path, int fd, int index, boolean readable, boolean writable, boolean direct,
            int memoryAlignment, int offsetAlignment) {
        this.ring = ring;
        this.path = path;
        this.fd = fd;
        this.index = index;
        this.sqeFd = index >= 0 ? index : fd;
        this.sqeFlags = index >= 0 ? UringLayout.SQE_FIXED_FILE : 0;
        this.readable = readable;
        this.writable = writable;
        this.direct = direct;
        this.memoryAlignment = memoryAlignment;
        this.offsetAlignment = offsetAlignment;
    }

    /** The path it was opened with. */
    public Path path() {
        return path;
    }

    /** Its index in the ring's fixed-file table, or -1 unless opened with {@link Mode#REGISTERED}. */
    public int index() {
        return index;
    }

    /** True if opened with {@link Mode#DIRECT}. */
    public boolean isDirect() {
        return direct;
    }

    /** The alignment of memory addresses and lengths for {@code O_DIRECT} (1 for a buffered file). */
    public int memoryAlignment() {
        return memoryAlignment;
    }

    /** The alignment of file offsets for {@code O_DIRECT} (1 for a buffered file). */
    public int offsetAlignment() {
        return offsetAlignment;
    }

    /** True once closed. */
    public boolean isClosed() {
        return closed;
    }

    /**
     * Removes the file from the ring's table (if registered) and closes its descriptor. Operations already submitted
     * finish (the kernel keeps its own reference); new ones are refused with {@link Errno#EBADF}.
     * Closing twice does nothing.
     *
     * @throws RdmaException {@link Errno#EPERM} on a thread other than the ring's owner
     */
    @Override
    public void close() {
        ring.closeFile(this);
    }

    void checkOpen(String what) {
        if (closed) {
            throw new RdmaException(Errno.EBADF, ring + "." + what + ": " + this + " is closed");
        }
    }

    @Override
    public String toString() {
        return "IoFile[" + path + (index >= 0 ? ", fixed file " + index : ", fd " + fd) + (direct ? ", O_DIRECT" : "") + (closed ? ", closed" : "") + "]";
    }
}
