package io.regmem.registration.shm;

import io.regmem.core.internal.Libc;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.registration.WcStatus;
import java.lang.foreign.MemorySegment;

/**
 * An initiator taking a grant ({@link Wire#RGRANT}) for its oldest request, a READ it asked to copy
 * itself: the record checked (its READ, entries that add up to the READ's length), the bytes copied
 * out of the target's memory into the entries the READ resolved when it started, in the initiator's
 * own sections ({@code process_vm_readv}, pieces of at most 1 MiB), then the target's withdrawn word
 * read: a grant withdrawn before that read fails the READ, whatever was copied ({@link Grants}).
 */
final class GrantedRead {
    private GrantedRead() {
    }

    /**
     * Takes the grant at {@code r}'s position (consumed and given back here) for the oldest started
     * request of {@code in}; its verdict: SUCCESS (every byte placed), LOC_PROT_ERR (its memory here went
     * away, or a deregistration gave up on it), REM_ACCESS_ERR (not there in the target, or the grant
     * was withdrawn), REM_OP_ERR (the kernel refused the copy: later READs go through the ring).
     *
     * @throws Ring.Violation for a grant where none is due, or one that does not fit its READ
     */
    static WcStatus take(ShmQp qp, Lane lane, Started in, Ring r) {
        MemorySegment m = r.segment();
        int s = in.head;
        long g = r.length >= Wire.GRANT_HEADER ? m.get(JAVA_LONG, r.payload + Wire.G_SEQ) : -1;
        int n = r.length >= Wire.GRANT_HEADER ? m.get(JAVA_INT, r.payload + Wire.G_ENTRIES) : -1;
        if (in.count == 0 || !Wire.isRead(in.op[s]) || !in.pulled[s] || g != in.seq[s] || in.placed[s] != 0
                || n < 1 || n > Wire.MAX_ENTRIES || r.length != Wire.GRANT_HEADER + Wire.ENTRY * n) {
            throw qp.violation("a grant of " + r.length + " bytes for request " + g + " where "
                    + (in.count == 0 ? "none is due" : "request " + in.seq[s] + "'s answer is due"));
        }
        qp.copies.takeEntries(m, r.payload + Wire.GRANT_HEADER, n, in.total[s]);
        r.consume();
        r.release();
        if (in.failed[s]) {
            return WcStatus.LOC_PROT_ERR; // abandoned by a deregistration here: nothing is placed
        }
        long got;
        qp.reader.enter();
        try {
            if (!in.sinks[s].answerable()) {
                got = Copies.LOCAL_FAILED;
            } else if (!lane.peerRunning()) {
                got = -Libc.ESRCH; // (its pid may name another process by now)
            } else {
                got = qp.copies.pull(qp.reader, lane.peerPid, n, in.sinks[s], in.total[s]);
            }
        } finally {
            qp.reader.exit();
        }
        if (got == Copies.LOCAL_FAILED) {
            return WcStatus.LOC_PROT_ERR;
        }
        if (got == -Libc.EFAULT || lane.peerRevoked() > g) {
            return WcStatus.REM_ACCESS_ERR;
        }
        if (got < 0) {
            lane.pulls = false; // refused (a tracer grant withdrawn, a sandbox): later READs go through the ring
            return WcStatus.REM_OP_ERR;
        }
        in.placed[s] = in.total[s];
        return WcStatus.SUCCESS;
    }
}
