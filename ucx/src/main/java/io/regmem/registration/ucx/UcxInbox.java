package io.regmem.registration.ucx;

/**
 * Messages that arrived for one QP and wait to be delivered into its receives: filled by the
 * active-message callback (inside the worker's progress, under the worker lock), emptied by the QP's
 * delivery (under its execution lock). A ring of parallel arrays that grows when full, so a message
 * costs no allocation in steady state. Guarded by {@code this}.
 */
final class UcxInbox {
    private long[] data = new long[16];
    private long[] length = new long[16];
    private long[] seq = new long[16];
    private long[] remoteAddress = new long[16];
    private int[] opcode = new int[16];
    private int[] imm = new int[16];
    private int[] invalidate = new int[16];
    private int[] rkey = new int[16];
    /** Each message's flags ({@link UcxAm#flags}: its sender's RNR retry count, solicited). */
    private int[] flags = new int[16];
    /** Whether each message is a rendezvous message (its data a UCX descriptor to receive). */
    private boolean[] rndv = new boolean[16];
    private int head;
    /** The bytes of UCX's data the waiting messages keep (eager data; not a rendezvous's, still at its sender). */
    private long keptBytes;
    /** Written under the monitor; read without it to find the inbox empty at the cost of a plain load. */
    private volatile int size;

    /** The oldest message, copied into {@code m}; false if there is none. */
    boolean peek(Message m) {
        if (size == 0) {
            return false; // the common case, without the monitor
        }
        return peekLocked(m);
    }

    private synchronized boolean peekLocked(Message m) {
        if (size == 0) {
            return false;
        }
        int i = head;
        m.data = data[i];
        m.length = length[i];
        m.seq = seq[i];
        m.remoteAddress = remoteAddress[i];
        m.opcode = opcode[i];
        m.imm = imm[i];
        m.invalidate = invalidate[i];
        m.rkey = rkey[i];
        m.flags = flags[i];
        m.rndv = rndv[i];
        return true;
    }

    /** Drops the oldest message (after {@link #peek}). */
    synchronized void pop() {
        if (!rndv[head] && data[head] != 0) {
            keptBytes -= length[head];
        }
        head = (head + 1) % data.length;
        size--;
    }

    /**
     * True if one more message of {@code len} kept bytes stays within a connection's window: fewer
     * than {@link UcxAm#WINDOW_MESSAGES} waiting, and within {@link UcxAm#WINDOW_BYTES} unless the
     * inbox is empty (a lone message may be larger). Worker lock held (as every add).
     */
    synchronized boolean fits(long len) {
        return size < UcxAm.WINDOW_MESSAGES && (size == 0 || keptBytes + len <= UcxAm.WINDOW_BYTES);
    }

    synchronized void add(long dataAddress, long len, long sequence, int op, int immData, int inv, long raddr, int key,
            int messageFlags, boolean rendezvous) {
        if (size == data.length) {
            grow();
        }
        int i = (head + size) % data.length;
        data[i] = dataAddress;
        length[i] = len;
        seq[i] = sequence;
        opcode[i] = op;
        imm[i] = immData;
        invalidate[i] = inv;
        remoteAddress[i] = raddr;
        rkey[i] = key;
        flags[i] = messageFlags;
        rndv[i] = rendezvous;
        if (!rendezvous && dataAddress != 0) {
            keptBytes += len;
        }
        size++;
    }

    boolean isEmpty() {
        return size == 0;
    }

    /** Messages waiting (a racy read, for diagnostics). */
    int size() {
        return size;
    }

    /**
     * True if empty, read without the monitor: for the AM callback holding the worker lock and the
     * QP's execution lock, which excludes every add (callbacks run under the worker lock) and every pop
     * (deliveries run under the execution lock) and orders it after them.
     */
    boolean isEmptyHeld() {
        return size == 0;
    }

    private void grow() {
        int n = data.length;
        int[] order = new int[n];
        for (int k = 0; k < n; k++) {
            order[k] = (head + k) % n;
        }
        data = regrow(data, order);
        length = regrow(length, order);
        seq = regrow(seq, order);
        remoteAddress = regrow(remoteAddress, order);
        opcode = regrow(opcode, order);
        imm = regrow(imm, order);
        invalidate = regrow(invalidate, order);
        rkey = regrow(rkey, order);
        flags = regrow(flags, order);
        boolean[] r = new boolean[rndv.length * 2];
        for (int k = 0; k < order.length; k++) {
            r[k] = rndv[order[k]];
        }
        rndv = r;
        head = 0;
    }

    private static long[] regrow(long[] a, int[] order) {
        long[] b = new long[a.length * 2];
        for (int k = 0; k < order.length; k++) {
            b[k] = a[order[k]];
        }
        return b;
    }

    private static int[] regrow(int[] a, int[] order) {
        int[] b = new int[a.length * 2];
        for (int k = 0; k < order.length; k++) {
            b[k] = a[order[k]];
        }
        return b;
    }

    /** One message as {@link #peek} reads it (reused by its reader). */
    static final class Message {
        long data;
        long length;
        long seq;
        long remoteAddress;
        int opcode;
        int imm;
        int invalidate;
        int rkey;
        /** The message's flags: its sender's RNR retry count (bits 0-2), solicited (bit 8). */
        int flags;

        /** The sender's RNR retry count (0 to 7). */
        int rnr() {
            return flags & UcxAm.FLAG_RNR_MASK;
        }

        /** The sender marked it solicited. */
        boolean solicited() {
            return (flags & UcxAm.FLAG_SOLICITED) != 0;
        }
        /** A rendezvous message: {@code data} is UCX's descriptor, its bytes not yet received. */
        boolean rndv;
    }
}
