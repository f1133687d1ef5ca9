package io.regmem.registration.uring;

import io.regmem.core.BufferPool;
import io.regmem.core.RdmaException;

/**
 * Run by {@code UringMemlockTest} in a child JVM without {@code CAP_IPC_LOCK} and with a small
 * {@code RLIMIT_MEMLOCK}: registering a 4 MiB chunk must fail with ENOMEM naming the limit, leave
 * nothing registered, and the ring must stay usable. Prints {@code OK <message>} or what went wrong.
 */
public final class UringMemlockMain {
    private UringMemlockMain() {
    }

    public static void main(String[] args) {
        try (IoRing ring = IoRing.open(8);
             BufferPool pool = BufferPool.builder().name("memlock").pageAligned().chunkSize(4 << 20).build()) {
            pool.allocate(4096).close(); // a 4 MiB chunk before the registration
            try {
                ring.register(pool);
                System.out.println("FAIL: registered 4 MiB under a 256 KiB memlock limit");
                System.exit(1);
            } catch (RdmaException e) {
                if (ring.fixedBuffersInUse() != 0) {
                    System.out.println("FAIL: " + ring.fixedBuffersInUse() + " slot(s) left after the refusal");
                    System.exit(1);
                }
                System.out.println("OK " + e.errno() + " " + e.getMessage());
            }
            ring.poll((u, r) -> { });
        } catch (RdmaException e) {
            System.out.println("SETUP " + e.errno() + " " + e.getMessage());
            System.exit(2);
        }
    }
}
