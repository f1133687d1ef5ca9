package io.regmem.registration.uring;

import static io.regmem.registration.uring.UringLayout.*;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Fcntl;
import io.regmem.core.internal.Stat;
import io.regmem.core.internal.Unistd;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.EnumSet;
import java.util.List;

/** The files open on a ring and its fixed-file table (for those opened REGISTERED); used by the ring's owner only. */
final class FileTable {
    private final IoRing ring;
    private final int fd;
    private final Arena arena;
    private final MemorySegment capture;
    private final MemorySegment scratch;
    private final int max;
    private final BitSet used = new BitSet();
    private final List<IoFile> files = new ArrayList<>();

    FileTable(IoRing ring, int fd, Arena arena, MemorySegment capture, MemorySegment scratch, int max) {
        this.ring = ring;
        this.fd = fd;
        this.arena = arena;
        this.capture = capture;
        this.scratch = scratch;
        this.max = max;
    }

    int open() {
        return files.size();
    }

    /** Opens {@code path} and puts it in a free slot; see {@link IoRing#openFile}. */
    IoFile open(Path path, IoFile.Mode... modes) {
        EnumSet<IoFile.Mode> m = EnumSet.noneOf(IoFile.Mode.class);
        m.addAll(Arrays.asList(modes));
        boolean rd = m.contains(IoFile.Mode.READ);
        boolean wr = m.contains(IoFile.Mode.WRITE);
        boolean direct = m.contains(IoFile.Mode.DIRECT);
        if (!rd && !wr) {
            throw new RdmaException(Errno.EINVAL, ring + ".openFile(" + path + "): modes " + m + " have neither READ nor WRITE");
        }
        int flags = (rd && wr ? Fcntl.O_RDWR : wr ? Fcntl.O_WRONLY : Fcntl.O_RDONLY) | Fcntl.O_CLOEXEC
                | (m.contains(IoFile.Mode.CREATE) ? Fcntl.O_CREAT : 0) | (m.contains(IoFile.Mode.TRUNCATE) ? Fcntl.O_TRUNC : 0)
                | (direct ? Fcntl.O_DIRECT : 0) | (m.contains(IoFile.Mode.DSYNC) ? Fcntl.O_DSYNC : 0);
        String p = path.toAbsolutePath().toString();
        int newFd = Fcntl.open(capture, p, flags);
        if (newFd < 0) {
            int errno = -newFd;
            throw new RdmaException(Errno.of(errno), ring + ".openFile(" + path + ", " + m + "): open failed with errno " + errno
                    + (errno == Errno.EINVAL.value() && direct ? " (O_DIRECT not supported here?)" : ""));
        }
        int memAlign = 1;
        int offAlign = 1;
        if (direct) {
            MemorySegment st = arena.allocate(STATX_SIZE, 8);
            int rc = Stat.statx(capture, p, STATX_BASIC_STATS | STATX_DIOALIGN, st);
            int mask = rc == 0 ? st.get(ValueLayout.JAVA_INT, STATX_MASK) : 0;
            if ((mask & STATX_DIOALIGN) != 0) {
                memAlign = st.get(ValueLayout.JAVA_INT, STATX_DIO_MEM_ALIGN);
                offAlign = st.get(ValueLayout.JAVA_INT, STATX_DIO_OFFSET_ALIGN);
            } else {
                memAlign = 4096; // the file system does not say: the strictest common rule
                offAlign = 4096;
            }
            if (memAlign == 0 || offAlign == 0) {
                Unistd.close(capture, newFd);
                throw new RdmaException(Errno.EINVAL, ring + ".openFile(" + path + "): the file system does not support "
                        + "O_DIRECT for this file (STATX_DIOALIGN is 0)");
            }
        }
        int index = -1;
        if (m.contains(IoFile.Mode.REGISTERED)) {
            index = used.nextClearBit(0);
            if (index >= max) {
                Unistd.close(capture, newFd);
                throw new RdmaException(Errno.ENOMEM, ring + ".openFile(" + path + "): all " + max
                        + " fixed-file slots are taken (IoRing.Builder.fixedFiles)");
            }
            long rc = update(index, newFd);
            if (rc < 0) {
                Unistd.close(capture, newFd);
                throw new RdmaException(Errno.of((int) -rc), ring + ".openFile(" + path
                        + "): registering the file failed with errno " + -rc);
            }
            used.set(index);
        }
        IoFile f = new IoFile(ring, path, newFd, index, rd, wr, direct, memAlign, offAlign);
        files.add(f);
        return f;
    }

    /** Clears the file's slot and closes its descriptor. */
    void close(IoFile f) {
        if (f.index >= 0) {
            update(f.index, -1);
            used.clear(f.index);
        }
        Unistd.close(capture, f.fd);
        files.remove(f);
        f.closed = true;
    }

    /** Closes every file (ring close). */
    void closeAll(boolean clearSlots) {
        for (IoFile f : List.copyOf(files)) {
            if (clearSlots) {
                close(f);
            } else {
                Unistd.close(capture, f.fd);
                f.closed = true;
            }
        }
        files.clear();
    }

    /** Sets a fixed-file slot to {@code fileFd} (-1 clears it); 1, or -errno. */
    private long update(int index, int fileFd) {
        MemorySegment u = scratch;
        u.fill((byte) 0);
        u.set(ValueLayout.JAVA_INT, 64, fileFd);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_OFFSET, index);
        u.set(ValueLayout.JAVA_LONG, RSRC_UPDATE2_DATA, u.address() + 64);
        u.set(ValueLayout.JAVA_INT, RSRC_UPDATE2_NR, 1);
        return Unistd.syscall(capture, SYS_IO_URING_REGISTER, fd, REGISTER_FILES_UPDATE2, u.address(), RSRC_UPDATE2_SIZE, 0, 0);
    }
}
