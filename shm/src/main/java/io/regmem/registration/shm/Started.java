package io.regmem.registration.shm;

import io.regmem.registration.Opcode;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.Segments;

/**
 * The requests an initiator ({@link ShmInitiator}) started and the target has not yet answered, oldest
 * first: a FIFO of the send queue's depth, with what each needs when its answer comes. Its owner's
 * execution lock guards it; {@link ShmQp#quiet()} reads a few fields without it (racy by design).
 */
final class Started {
    final long[] seq;
    final Opcode[] op;
    final long[] total;
    /** When the request started, or the target last said it holds it (for the answer timeout). */
    final long[] since;
    /** READ bytes placed so far. */
    final long[] placed;
    /** Its answer is refused locally (its memory went away, or the stream was aborted). */
    final boolean[] failed;
    /** The request's entries are pulled by the target (it reads them until its answer). */
    final boolean[] pulled;
    /** The request is signaled (somebody waits for its completion). */
    final boolean[] signaled;
    /** Where a READ's bytes or an atomic's value go, or a pulled request's sources. */
    final Segments[] sinks;
    int head;
    int count;
    /** Started signaled requests not yet completed. */
    int signaledOut;
    /** Bytes of pulled requests not yet answered (a deregistration of their sources waits for them). */
    long pulling;

    Started(int depth) {
        seq = new long[depth];
        op = new Opcode[depth];
        total = new long[depth];
        since = new long[depth];
        placed = new long[depth];
        failed = new boolean[depth];
        pulled = new boolean[depth];
        signaled = new boolean[depth];
        sinks = new Segments[depth];
        for (int i = 0; i < depth; i++) {
            sinks[i] = new Segments();
        }
    }

    /** True if a started request placing an answer resolved an entry through {@code region}. */
    boolean answersInto(MrContext region) {
        for (int i = 0, s = head; i < count; i++, s = (s + 1) % seq.length) {
            if ((Wire.isRead(op[s]) || Wire.isAtomic(op[s]) || pulled[s]) && sinks[s].resolvedThrough(region)) {
                return true;
            }
        }
        return false;
    }

    /** Marks the answers still to come into {@code region} as refused: those requests fail, nothing is placed. */
    void abandonAnswersInto(MrContext region) {
        for (int i = 0, s = head; i < count; i++, s = (s + 1) % seq.length) {
            if ((Wire.isRead(op[s]) || Wire.isAtomic(op[s]) || pulled[s]) && sinks[s].resolvedThrough(region)) {
                failed[s] = true;
            }
        }
    }
}
