package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Fcntl;
import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Mman;
import io.regmem.core.internal.Unistd;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A connection's shared memory: an anonymous {@code memfd} (no name in {@code /dev/shm}, gone with the
 * last descriptor and mapping) sealed against shrinking and growing, so that a peer can never cut it
 * under a mapping (an access past a shrunk file's end is a SIGBUS, which would take the JVM down), and
 * sealed against further seals. The side that makes it sizes and seals it; the side that receives it
 * ({@code SCM_RIGHTS}) maps it only after {@link #verify} found those seals and the agreed size.
 *
 * <p>A mapping is a {@link MemorySegment} of a shared arena whose close unmaps it: an access after the
 * close throws {@link IllegalStateException}, never touches unmapped memory.
 */
final class SharedFile {
    /** The seals a lane's memfd carries: no shrinking, no growing, no more seals. */
    static final int SEALS = Fcntl.F_SEAL_SHRINK | Fcntl.F_SEAL_GROW | Fcntl.F_SEAL_SEAL;

    private SharedFile() {
    }

    /**
     * Makes a sealed memfd of {@code size} bytes.
     *
     * @return its descriptor (close-on-exec)
     * @throws RdmaException {@link Errno#ENOMEM} if it cannot be made or sized
     */
    static int create(String name, long size) {
        int fd = createPublication(name, size);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            int rc = Fcntl.fcntl(capture, fd, Fcntl.F_ADD_SEALS, SEALS);
            if (rc < 0) {
                Unistd.close(capture, fd);
                throw new RdmaException(Errno.ENOMEM, "shm: sealing a memfd of " + size + " bytes failed with errno " + -rc);
            }
            return fd;
        }
    }

    /**
     * Makes a memfd of {@code size} bytes, sized, not sealed yet: a publication's (its writer maps it
     * first, then {@link #sealPublication} seals it against any other writable mapping), or a lane's
     * ({@link #create} seals it at once).
     *
     * @return its descriptor (close-on-exec)
     * @throws RdmaException {@link Errno#ENOMEM} if it cannot be made or sized
     */
    static int createPublication(String name, long size) {
        Libc.requireBound("shm");
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            int fd = Mman.memfdCreate(capture, a.allocateFrom(name), Mman.MFD_CLOEXEC | Mman.MFD_ALLOW_SEALING);
            if (fd < 0) {
                throw new RdmaException(Errno.ENOMEM, "shm: memfd_create failed with errno " + -fd);
            }
            int rc = Unistd.ftruncate(capture, fd, size);
            if (rc < 0) {
                Unistd.close(capture, fd);
                throw new RdmaException(Errno.ENOMEM, "shm: sizing a memfd of " + size + " bytes failed with errno " + -rc);
            }
            return fd;
        }
    }

    /** The seals of a publication: no shrinking, growing, writable mapping but its writer's, or more seals. */
    static final int PUBLICATION_SEALS = SEALS | Fcntl.F_SEAL_FUTURE_WRITE;

    /**
     * Seals a publication's memfd, once its writer mapped it, with {@link #PUBLICATION_SEALS}: no other
     * process can ever write it (a member that receives it can map it only read-only).
     *
     * @throws RdmaException {@link Errno#ENOMEM} if the kernel refuses
     */
    static void sealPublication(int fd) {
        try (Arena a = Arena.ofConfined()) {
            int rc = Fcntl.fcntl(a.allocate(Libc.CAPTURE), fd, Fcntl.F_ADD_SEALS, PUBLICATION_SEALS);
            if (rc < 0) {
                throw new RdmaException(Errno.ENOMEM, "shm: sealing a publication's memfd failed with errno " + -rc);
            }
        }
    }

    /**
     * Checks a received publication's memfd before it is mapped: sealed with {@link #PUBLICATION_SEALS}.
     *
     * @return its length, or -1 if it is not sealed so (or not a memfd)
     */
    static long verifyPublication(int fd) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            int seals = Fcntl.fcntl(capture, fd, Fcntl.F_GET_SEALS, 0);
            if (seals < 0 || (seals & PUBLICATION_SEALS) != PUBLICATION_SEALS) {
                return -1;
            }
            return Unistd.lseek(capture, fd, 0, Unistd.SEEK_END);
        }
    }

    /**
     * Maps {@code size} bytes of {@code fd}, shared and read-only, into {@code arena}: a segment that
     * refuses writes ({@link MemorySegment#asReadOnly}); the arena's close unmaps it.
     *
     * @throws RdmaException {@link Errno#ENOMEM} if it cannot be mapped
     */
    static MemorySegment mapReadOnly(int fd, long size, Arena arena) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            long address = Mman.mmap(capture, 0L, size, Mman.PROT_READ, Mman.MAP_SHARED, fd, 0L);
            if (address < 0) {
                throw new RdmaException(Errno.ENOMEM, "shm: mapping a publication of " + size + " bytes failed with errno "
                        + -address);
            }
            return MemorySegment.ofAddress(address).reinterpret(size, arena, s -> unmap(s.address(), size)).asReadOnly();
        }
    }

    /**
     * Checks a received memfd before it is mapped: sealed with {@link #SEALS} and exactly {@code size}
     * bytes long.
     *
     * @return null if it may be mapped, else why not
     */
    static String verify(int fd, long size) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            int seals = Fcntl.fcntl(capture, fd, Fcntl.F_GET_SEALS, 0);
            if (seals < 0) {
                return "not a sealable memfd (F_GET_SEALS failed with errno " + -seals + ")";
            }
            if ((seals & SEALS) != SEALS) {
                return "its seals are 0x" + Integer.toHexString(seals) + ", not shrink, grow and seal";
            }
            long length = Unistd.lseek(capture, fd, 0, Unistd.SEEK_END);
            if (length != size) {
                return "it is " + length + " bytes long, not " + size;
            }
            return null;
        }
    }

    /**
     * Maps {@code size} bytes of {@code fd}, shared, readable and writable, into {@code arena}: the
     * arena's close unmaps it.
     *
     * @throws RdmaException {@link Errno#ENOMEM} if it cannot be mapped
     */
    static MemorySegment map(int fd, long size, Arena arena) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            long address = Mman.mmap(capture, 0L, size, Mman.PROT_READ | Mman.PROT_WRITE, Mman.MAP_SHARED, fd, 0L);
            if (address < 0) {
                throw new RdmaException(Errno.ENOMEM, "shm: mapping a memfd of " + size + " bytes failed with errno " + -address);
            }
            return MemorySegment.ofAddress(address).reinterpret(size, arena, s -> unmap(s.address(), size));
        }
    }

    private static void unmap(long address, long size) {
        try (Arena a = Arena.ofConfined()) {
            Mman.munmap(a.allocate(Libc.CAPTURE), address, size);
        }
    }

    /** Closes a descriptor (errors ignored: it is gone either way). */
    static void close(int fd) {
        if (fd < 0) {
            return;
        }
        try (Arena a = Arena.ofConfined()) {
            Unistd.close(a.allocate(Libc.CAPTURE), fd);
        }
    }
}
