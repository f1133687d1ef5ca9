package io.regmem.registration;

import java.util.concurrent.locks.ReentrantLock;

/**
 * The in-process "wire" shared by every device of this JVM: one lock serializes the data path
 * (posting, progress, polling) across devices, since a soft RDMA operation touches both ends of a
 * connection. Simple and correct; per-QP locking is a later optimization.
 */
final class Fabric {
    static final ReentrantLock LOCK = new ReentrantLock();
    private static volatile RdmaDevice[] devices = new RdmaDevice[0];
    /** Listening CM IDs by name. Guarded by LOCK. */
    static final java.util.Map<String, CmId> LISTENERS = new java.util.HashMap<>();

    private Fabric() {
    }

    /** The open devices (a snapshot array; iterating it allocates nothing). */
    static RdmaDevice[] devices() {
        return devices;
    }

    static void add(RdmaDevice d) {
        LOCK.lock();
        try {
            RdmaDevice[] next = java.util.Arrays.copyOf(devices, devices.length + 1);
            next[devices.length] = d;
            devices = next;
        } finally {
            LOCK.unlock();
        }
    }

    static void remove(RdmaDevice d) {
        LOCK.lock();
        try {
            devices = java.util.Arrays.stream(devices).filter(x -> x != d).toArray(RdmaDevice[]::new);
        } finally {
            LOCK.unlock();
        }
    }
}
