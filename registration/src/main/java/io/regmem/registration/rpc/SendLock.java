package io.regmem.registration.rpc;

import java.util.concurrent.locks.ReentrantLock;

/**
 * The transport's send lock ({@code xprt->transport_lock} in the kernel's send path): held by the
 * one thread that prepares and posts Sends, by connect and by disconnect. It protects what the
 * kernel protects with it: the send-context ring's consumer side and the list of all requests
 * ({@link RpcBuffer#destroyReq} requires it).
 */
public final class SendLock {
    private final ReentrantLock lock = new ReentrantLock();

    /** A lock no thread holds. */
    public SendLock() {
    }

    /** Takes the lock. */
    public void lock() {
        lock.lock();
    }

    /** Releases the lock. */
    public void unlock() {
        lock.unlock();
    }

    /** Whether the calling thread holds it. */
    public boolean isHeldByCurrentThread() {
        return lock.isHeldByCurrentThread();
    }
}
