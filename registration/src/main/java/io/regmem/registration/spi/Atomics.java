package io.regmem.registration.spi;

import io.regmem.registration.Access;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * An atomic at its target, for software data paths: the checks a responder makes (the key grants
 * {@link Access#REMOTE_ATOMIC} and covers the 8 bytes; the address is 8-byte aligned) and the
 * operation itself as one hardware compare-and-exchange or get-and-add on the target's memory, so
 * atomics on one address are atomic against each other from any number of QPs and threads (and
 * against the target process's own atomic accesses). Values are 64-bit, in the target's native
 * byte order. Called inside the executing QP's grace-period section, as its copies are.
 */
public final class Atomics {
    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private Atomics() {
    }

    /**
     * Executes {@code op} at {@code [addr, addr + 8)} under {@code rkey} of {@code target}, leaving
     * the value found in {@code result} (8 bytes) on success.
     *
     * @param scratch a list of the caller's to resolve into (cleared afterwards)
     * @return {@link WcStatus#SUCCESS}, {@link WcStatus#REM_ACCESS_ERR} for a key that does not
     *         resolve, grant the right or cover the range (or memory gone meanwhile), or
     *         {@link WcStatus#REM_INV_REQ_ERR} for a misaligned address
     */
    public static WcStatus execute(MemoryAccess target, Opcode op, long addr, int rkey, long compareAdd, long swap,
            Segments scratch, MemorySegment result) {
        try {
            if (!target.resolveRemote(addr, 8, rkey, Access.REMOTE_ATOMIC, scratch)) {
                return WcStatus.REM_ACCESS_ERR;
            }
            if (scratch.count() != 1) {
                return WcStatus.REM_INV_REQ_ERR; // split over pages: misaligned (an aligned 8 bytes never straddles a page)
            }
            MemorySegment seg = scratch.segment(0);
            long off = scratch.offset(0);
            if (!seg.isNative() || ((seg.address() + off) & 7) != 0) {
                return WcStatus.REM_INV_REQ_ERR; // misaligned
            }
            long old = op == Opcode.ATOMIC_CMP_AND_SWP ? (long) LONG.compareAndExchange(seg, off, compareAdd, swap)
                    : (long) LONG.getAndAdd(seg, off, compareAdd);
            result.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, old);
            return WcStatus.SUCCESS;
        } catch (IllegalStateException | IllegalArgumentException | IndexOutOfBoundsException gone) {
            return WcStatus.REM_ACCESS_ERR; // the memory's arena closed under the access
        } finally {
            scratch.clear();
        }
    }
}
