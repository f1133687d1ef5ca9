package io.regmem.bench;

import io.regmem.registration.Access;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QueuePair;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.BooleanSupplier;

/**
 * One end of a SEND/RECV ping-pong over the public verbs API, as a libibverbs program writes it:
 * {@link #RECVS} receives posted in a ring of buffers, a SEND from a registered buffer, a completion
 * queue polled by one thread. Sends are signaled one in {@link #SIGNAL_EVERY} (the others complete
 * silently and keep their queue slots until then, as verbs says). The echo side answers each message
 * with a SEND of the same bytes from the buffer it arrived in, then posts that receive again.
 * Allocates nothing per message.
 */
final class VerbsEcho {
    static final int RECVS = 16;
    static final int SIGNAL_EVERY = 16;
    /** Bytes per buffer: 4096, or {@code REGMEM_BENCH_PINGPONG_MAX} from the environment (a child inherits it). */
    static final int MAX = max();

    private static int max() {
        String v = System.getenv("REGMEM_BENCH_PINGPONG_MAX");
        return v == null || v.isEmpty() ? 4096 : Integer.parseInt(v);
    }

    private final QueuePair qp;
    private final CompletionQueue cq;
    private final MemoryRegion mr;
    private final MemorySegment memory;
    private final WorkRequest send = new WorkRequest(1);
    private final WorkRequest recv = new WorkRequest(1);
    private final WorkCompletion[] wcs = new WorkCompletion[RECVS + 1];
    private long sends;

    /** Registers {@code RECVS + 1} buffers of {@link #MAX} bytes from {@code arena} and posts the receives. */
    VerbsEcho(ProtectionDomain pd, QueuePair qp, CompletionQueue cq, Arena arena) {
        this.qp = qp;
        this.cq = cq;
        this.memory = arena.allocate((long) (RECVS + 1) * MAX, 4096);
        this.mr = pd.register(memory, Access.LOCAL_WRITE);
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        for (int i = 0; i < RECVS; i++) {
            postRecv(i);
        }
    }

    private void postRecv(int slot) {
        qp.postRecv(recv.reset().wrId(slot).addSge(memory.address() + (long) slot * MAX, MAX, mr.lkey()));
    }

    private void postSend(long address, int length) {
        boolean signaled = ++sends % SIGNAL_EVERY == 0;
        qp.postSend(send.reset().wrId(-1).opcode(Opcode.SEND).signaled(signaled).addSge(address, length, mr.lkey()));
    }

    /** Sends {@code length} bytes from the send buffer. */
    void ping(int length) {
        postSend(memory.address() + (long) RECVS * MAX, length);
    }

    /** One poll of the CQ: the completions it took (for a measure of a poll that finds nothing). */
    int pollOnce() {
        return cq.poll(wcs);
    }

    /**
     * Polls until a message arrives; returns its length (its receive is posted again). Send
     * completions met on the way are taken (they free the queue's slots).
     */
    int awaitMessage() {
        while (true) {
            int n = cq.poll(wcs);
            int got = -1;
            for (int i = 0; i < n; i++) {
                WorkCompletion wc = wcs[i];
                if (wc.status() != WcStatus.SUCCESS) {
                    throw new IllegalStateException("ping-pong: " + wc);
                }
                if (wc.opcode() == Opcode.RECV) {
                    postRecv((int) wc.wrId());
                    got = (int) wc.byteLen();
                }
            }
            if (got >= 0) {
                return got;
            }
            Thread.onSpinWait();
        }
    }

    /**
     * The echo side, until {@code stop} says so: each message is sent back from the buffer it arrived
     * in, then its receive is posted again.
     */
    void echo(BooleanSupplier stop) {
        while (!stop.getAsBoolean()) {
            int n = cq.poll(wcs);
            for (int i = 0; i < n; i++) {
                WorkCompletion wc = wcs[i];
                if (wc.status() == WcStatus.WR_FLUSH_ERR) {
                    return; // disconnected
                }
                if (wc.status() != WcStatus.SUCCESS) {
                    throw new IllegalStateException("echo: " + wc);
                }
                if (wc.opcode() == Opcode.RECV) {
                    int slot = (int) wc.wrId();
                    postSend(memory.address() + (long) slot * MAX, (int) wc.byteLen());
                    // The same buffer takes the next message: in a ping-pong that comes only after the peer
                    // received this answer, so the SEND has read the buffer by then.
                    postRecv(slot);
                }
            }
            if (n == 0) {
                Thread.onSpinWait();
            }
        }
    }

    /** Takes the completions left (after the peer went away) and deregisters the buffers. */
    void close() {
        while (cq.poll(wcs) > 0) {
            // flushed
        }
        mr.close();
    }
}
