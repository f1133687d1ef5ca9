package io.regmem.registration.shm;

import java.lang.foreign.Arena;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * A publication (of another device of this host, or of the device itself) that a device reads: its
 * read-only mapping, the reader's position, and a pidfd of the writer's process (-errno if none is
 * known: the device's own), by which a publication whose writer died is found and left.
 */
final class GroupSubscription {
    final InetAddress group;
    final long pid;
    final long id;
    final InetSocketAddress from;
    final Arena arena;
    final GroupRing.Reader reader;
    final int pidfd;
    /** A field of the ring broke the protocol: it is read no more. */
    volatile boolean broken;
    /** When the writer's process was first seen dead (the sweeping thread's). */
    long deadSince;

    GroupSubscription(InetAddress group, GroupMessage m, InetSocketAddress from, Arena arena, GroupRing.Reader reader,
                      int pidfd) {
        this.group = group;
        this.pid = m.pid();
        this.id = m.publication();
        this.from = from;
        this.arena = arena;
        this.reader = reader;
        this.pidfd = pidfd;
    }

    /** Unmaps it (a reader inside it meanwhile gets an {@link IllegalStateException}, and skips it). */
    void unmap() {
        arena.close();
        SharedFile.close(pidfd);
    }
}
