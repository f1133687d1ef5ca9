package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The in-process "wire" shared by every device of this JVM: one lock serializes the data path
 * (posting, progress, polling) across devices, since a soft RDMA operation touches both ends of a
 * connection. Simple and correct; per-QP locking is a later optimization.
 */
final class Fabric {
    static final ReentrantLock LOCK = new ReentrantLock();
    /**
     * The grace-period domain of the data path: every queue pair's executor is a reader; whoever
     * deregisters or invalidates memory waits a grace period before returning (see {@link GracePeriod}).
     */
    static final GracePeriod GRACE = new GracePeriod();
    private static volatile RdmaDevice[] devices = new RdmaDevice[0];
    /** Listening CM IDs by name. Guarded by LOCK. */
    static final java.util.Map<String, CmId> LISTENERS = new java.util.HashMap<>();

    private Fabric() {
    }

    /** The open devices (a snapshot array; iterating it allocates nothing). */
    static RdmaDevice[] devices() {
        return devices;
    }

    /**
     * Names and adds a new device: {@code asked}, or the provider's name and the lowest number no
     * open device uses.
     *
     * @throws RdmaException {@link Errno#EEXIST} if an open device already has the asked name
     */
    static RdmaDevice add(java.util.function.Function<String, RdmaDevice> make, String provider, String asked) {
        LOCK.lock();
        try {
            java.util.Set<String> taken = new java.util.HashSet<>();
            for (RdmaDevice d : devices) {
                taken.add(d.name());
            }
            String name = asked;
            if (name == null) {
                int n = 0;
                while (taken.contains(provider + n)) {
                    n++;
                }
                name = provider + n;
            } else if (taken.contains(name)) {
                throw new RdmaException(Errno.EEXIST, "RdmaDevice: a device named '" + name + "' is open already");
            }
            RdmaDevice d = make.apply(name);
            RdmaDevice[] next = java.util.Arrays.copyOf(devices, devices.length + 1);
            next[devices.length] = d;
            devices = next;
            return d;
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
