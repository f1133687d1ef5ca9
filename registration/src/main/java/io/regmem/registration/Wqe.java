package io.regmem.registration;

/**
 * A work queue entry: the copy of a {@link WorkRequest} a queue keeps, so the caller may reuse its
 * request at once. Preallocated per queue slot.
 */
final class Wqe {
    final long[] address;
    final long[] length;
    final int[] lkey;
    int numSge;
    long wrId;
    Opcode opcode;
    boolean signaled;
    long remoteAddress;
    int rkey;
    int immData;
    int invalidateRkey;
    MemoryRegion regMr;
    int regKey;
    int regAccess;
    /** A status injected by a test's fault plan, or null. */
    WcStatus injected;

    Wqe(int maxSge) {
        address = new long[maxSge];
        length = new long[maxSge];
        lkey = new int[maxSge];
    }

    void copyFrom(WorkRequest wr, boolean signalAll) {
        numSge = wr.numSge();
        for (int i = 0; i < numSge; i++) {
            address[i] = wr.sgeAddress(i);
            length[i] = wr.sgeLength(i);
            lkey[i] = wr.sgeLkey(i);
        }
        wrId = wr.wrId();
        opcode = wr.opcode();
        signaled = signalAll || wr.signaled();
        remoteAddress = wr.remoteAddress();
        rkey = wr.rkey();
        immData = wr.immData();
        invalidateRkey = wr.invalidateRkey();
        regMr = wr.regMr();
        regKey = wr.regKey();
        regAccess = wr.regAccess();
        injected = null;
    }

    long totalLength() {
        long t = 0;
        for (int i = 0; i < numSge; i++) {
            t += length[i];
        }
        return t;
    }
}
