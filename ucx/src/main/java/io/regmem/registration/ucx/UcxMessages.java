package io.regmem.registration.ucx;

import io.regmem.registration.Opcode;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A device's incoming active messages, as its AM callback hands them over (inside a worker's
 * progress, worker lock held): each is checked against the QP it names (live, its connection's
 * token, arriving on that connection's worker) and its kind, then an acknowledgement or answer goes
 * to the sender QP's requests, and a message to the target QP: executed at once if nothing stands in
 * its way, else kept in its inbox, within the connection's window. What fails a check is dropped and
 * counted.
 */
final class UcxMessages {
    private final UcxDevice device;

    UcxMessages(UcxDevice device) {
        this.device = device;
    }

    /** Header fields arrive at any alignment (UCX places the header where the transport put it). */
    private static final ValueLayout.OfInt U_INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final ValueLayout.OfLong U_LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    /**
     * Messages the AM callback dropped: for no live QP of this device, with a wrong token, or not of
     * this provider's kinds (worker lock held to write; read racily by diagnostics).
     */
    long dropped;
    /** AM callbacks that failed with an exception (their message dropped), and the last such failure. */
    volatile long callbackFailures;
    volatile Throwable lastCallbackFailure;

    /** What the device's AM callback dropped, for a QP's {@link UcxQp#diagnostics()}. */
    String droppedDescription() {
        Throwable t = lastCallbackFailure;
        return "device: messages dropped " + dropped + ", callbacks failed " + callbackFailures
                + (t == null ? "" : " (last: " + t + ")");
    }

    /** The live QP with this number, or null. */
    private UcxQp qp(int number) {
        for (UcxQp qp : device.qps()) {
            if (qp.number == number) {
                return qp;
            }
        }
        return null;
    }

    /**
     * An active message arrived on the worker of channel {@code serial} (the AM callback, inside the
     * worker's progress, worker lock held):
     * an acknowledgement goes to its sender QP; a message is executed at once if nothing stands in
     * its way, else into its QP's inbox. True if the data (or a rendezvous descriptor) is kept, to
     * be released or received later.
     */
    boolean onMessage(MemorySegment h, int serial, long data, long length, boolean persistent, boolean rndv) {
        UcxQp qp = qp(h.get(U_INT, UcxAm.H_DST));
        if (qp == null || h.get(U_LONG, UcxAm.H_TOKEN) != qp.localToken || qp.channel.serial != serial) {
            dropped++;
            return false; // the QP is gone, or the message is not from its connection (nor on its worker): dropped
        }
        int type = h.get(U_INT, UcxAm.H_TYPE);
        if (type == UcxAm.TYPE_ACK) {
            qp.answersIn++;
            qp.acked(h.get(U_LONG, UcxAm.H_SEQ), h.get(U_INT, UcxAm.H_STATUS));
            return false;
        }
        if (type == UcxAm.TYPE_READ_RESPONSE) {
            qp.answersIn++;
            return (length == 0 || persistent || rndv)
                    && qp.readResponse(h.get(U_LONG, UcxAm.H_SEQ), h.get(U_INT, UcxAm.H_STATUS), length > 0 ? data : 0, length, rndv);
        }
        int opcode = h.get(U_INT, UcxAm.H_OPCODE);
        if (type != UcxAm.TYPE_MSG || opcode < 0 || opcode >= UcxAm.OPCODES.length
                || (length > 0 && !persistent && !(rndv && opcode == Opcode.RDMA_WRITE.ordinal()))) {
            dropped++;
            return false; // not a message this provider sends (eager data persists; only WRITEs go by rendezvous)
        }
        qp.messagesIn++;
        // A READ carries no bytes: its length travels in the header, in the length slot of the inbox.
        boolean read = opcode == Opcode.RDMA_READ.ordinal();
        long len = read ? h.get(U_LONG, UcxAm.H_LENGTH) : length;
        long seq = h.get(U_LONG, UcxAm.H_SEQ);
        int imm = h.get(U_INT, UcxAm.H_IMM);
        int inv = h.get(U_INT, UcxAm.H_INV);
        long raddr = h.get(U_LONG, UcxAm.H_RADDR);
        int rkey = h.get(U_INT, UcxAm.H_RKEY);
        int flags = h.get(U_INT, UcxAm.H_STATUS) & (UcxAm.FLAG_RNR_MASK | UcxAm.FLAG_SOLICITED);
        long d = length > 0 ? data : 0;
        if (qp.violated != null) {
            dropped++;
            return false; // the connection broke the protocol: it ends, nothing of it is kept
        }
        if (qp.executeNow(d, len, seq, opcode, imm, inv, raddr, rkey, flags, rndv)) {
            return false; // executed (or, by rendezvous, its receive started) in this callback: nothing kept
        }
        UcxInbox inbox = qp.inbox();
        if (!inbox.fits(d != 0 && !rndv ? len : 0)) {
            qp.violate("it sent beyond its window (" + inbox.size() + " messages waiting, at most "
                    + UcxAm.WINDOW_MESSAGES + " and " + UcxAm.WINDOW_BYTES + " bytes)");
            dropped++;
            return false;
        }
        inbox.add(d, len, seq, opcode, imm, inv, raddr, rkey, flags, rndv);
        return length > 0;
    }
}
