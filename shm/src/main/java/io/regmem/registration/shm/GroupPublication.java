package io.regmem.registration.shm;

import java.lang.foreign.Arena;
import java.net.InetAddress;

/**
 * One of a device's publications: QP {@code qpn}'s ring for {@code group} ({@link GroupRing}), under
 * {@code key} in its device's table, its memfd (kept open to hand to the members that ask) and its
 * writable mapping.
 */
record GroupPublication(int qpn, InetAddress group, long key, long id, int fd, Arena arena, GroupRing.Writer writer) {
    /** Ends it: the members read what is left, then unmap it; the writer's mapping and descriptor close. */
    void end() {
        writer.close();
        arena.close();
        SharedFile.close(fd);
    }
}
