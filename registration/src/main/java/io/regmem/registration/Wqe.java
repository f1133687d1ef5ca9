package io.regmem.registration;

import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.MwContext;
import io.regmem.registration.spi.PostedWr;
import java.lang.foreign.MemorySegment;

/**
 * A work queue entry: the copy of a {@link WorkRequest} a queue keeps, so the caller may reuse its
 * request at once. Preallocated per queue slot.
 */
final class Wqe implements PostedWr {
    final long[] address;
    final long[] length;
    final int[] lkey;
    int numSge;
    long wrId;
    Opcode opcode;
    boolean signaled;
    boolean solicited;
    long remoteAddress;
    int rkey;
    int immData;
    int invalidateRkey;
    long compareAdd;
    long swap;
    MrContext regMr;
    MwContext bindMw;
    long bindLength;
    int regKey;
    int regAccess;
    /** The request's sequence number in its queue. */
    long seq;
    AhAttributes ud;
    int remoteQpn;
    int remoteQkey;
    /** This slot's room for an inline payload (the QP's maxInlineData bytes), or null. */
    private final MemorySegment inlineSlot;
    /** The request's bytes were copied into {@link #inlineSlot} at post time: its one SGE points there. */
    boolean inline;

    Wqe(int maxSge) {
        this(maxSge, null);
    }

    Wqe(int maxSge, MemorySegment inlineSlot) {
        address = new long[maxSge];
        length = new long[maxSge];
        lkey = new int[maxSge];
        this.inlineSlot = inlineSlot;
    }

    void copyFrom(WorkRequest wr, boolean signalAll) {
        MemorySegment payload = wr.inlinePayload();
        inline = payload != null;
        if (inline) {
            // Copied now (checked by FFM: a payload freed or confined since the checks throws, and the
            // post fails before anything is published); the request's one SGE is this slot.
            long n = wr.inlineLength();
            MemorySegment.copy(payload, 0, inlineSlot, 0, n);
            numSge = 1;
            address[0] = inlineSlot.address();
            length[0] = n;
            lkey[0] = 0;
        } else {
            numSge = wr.numSge();
            for (int i = 0; i < numSge; i++) {
                address[i] = wr.sgeAddress(i);
                length[i] = wr.sgeLength(i);
                lkey[i] = wr.sgeLkey(i);
            }
        }
        wrId = wr.wrId();
        Opcode op = wr.opcode();
        if (opcode != op) { // (references stored only when they change: each store pays the collector's barrier)
            opcode = op;
        }
        signaled = signalAll || wr.signaled();
        solicited = wr.solicited();
        remoteAddress = wr.remoteAddress();
        rkey = wr.rkey();
        immData = wr.immData();
        invalidateRkey = wr.invalidateRkey();
        compareAdd = wr.compareAdd();
        swap = wr.swap();
        MrContext reg = wr.regMr() == null ? null : wr.regMr().context();
        if (regMr != reg) {
            regMr = reg;
        }
        MwContext bind = wr.bindMw() == null ? null : wr.bindMw().context();
        if (bindMw != bind) {
            bindMw = bind;
        }
        bindLength = wr.bindLength();
        regKey = wr.regKey();
        regAccess = wr.regAccess();
        AddressHandle ah = wr.ah();
        AhAttributes a = ah == null ? null : ah.attributes();
        if (ud != a) {
            ud = a;
        }
        remoteQpn = wr.remoteQpn();
        remoteQkey = wr.remoteQkey();
    }

    @Override
    public AhAttributes udAddress() {
        return ud;
    }

    @Override
    public int remoteQpn() {
        return remoteQpn;
    }

    @Override
    public int remoteQkey() {
        return remoteQkey;
    }

    @Override
    public MwContext bindMw() {
        return bindMw;
    }

    @Override
    public long bindLength() {
        return bindLength;
    }

    @Override
    public boolean solicited() {
        return solicited;
    }

    @Override
    public MemorySegment inlineData() {
        return inline ? inlineSlot : null;
    }

    @Override
    public long compareAdd() {
        return compareAdd;
    }

    @Override
    public long swap() {
        return swap;
    }

    @Override
    public long totalLength() {
        long t = 0;
        for (int i = 0; i < numSge; i++) {
            t += length[i];
        }
        return t;
    }

    @Override
    public long wrId() {
        return wrId;
    }

    @Override
    public Opcode opcode() {
        return opcode;
    }

    @Override
    public boolean signaled() {
        return signaled;
    }

    @Override
    public int numSge() {
        return numSge;
    }

    @Override
    public long sgeAddress(int i) {
        return address[i];
    }

    @Override
    public long sgeLength(int i) {
        return length[i];
    }

    @Override
    public int sgeLkey(int i) {
        return lkey[i];
    }

    @Override
    public long remoteAddress() {
        return remoteAddress;
    }

    @Override
    public int rkey() {
        return rkey;
    }

    @Override
    public int immData() {
        return immData;
    }

    @Override
    public int invalidateRkey() {
        return invalidateRkey;
    }

    @Override
    public MrContext regMr() {
        return regMr;
    }

    @Override
    public int regKey() {
        return regKey;
    }

    @Override
    public int regAccess() {
        return regAccess;
    }

    @Override
    public long seq() {
        return seq;
    }
}
