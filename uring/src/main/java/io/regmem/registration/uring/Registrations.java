package io.regmem.registration.uring;

import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** The pools registered with a ring ({@link IoRing#register}): each one's chunks take fixed-buffer slots. */
final class Registrations {
    private final List<IoRegistration> list = new CopyOnWriteArrayList<>();

    /** Registers {@code pool}'s chunks, present and future, with {@code ring} (owner checked). */
    IoRegistration add(IoRing ring, BufferPool pool) {
        if (pool == null) {
            throw new RdmaException(Errno.EINVAL, ring + ".register: pool is null");
        }
        IoRegistration r = new IoRegistration(ring, pool);
        list.add(r);
        try {
            pool.addChunkListener(r);
        } catch (RuntimeException e) {
            list.remove(r);
            throw e;
        }
        return r;
    }

    void forget(IoRegistration r) {
        list.remove(r);
    }

    /** Closes every registration (owner): their chunks are cleared from the table. */
    void closeAll() {
        for (IoRegistration r : list) {
            r.close();
        }
    }

    /** Detaches every registration from its pool without the kernel (the owner is gone), and forgets them. */
    void detachAll() {
        for (IoRegistration r : list) {
            r.detachAll();
        }
        list.clear();
    }
}
