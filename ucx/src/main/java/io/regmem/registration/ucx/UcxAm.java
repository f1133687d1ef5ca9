package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.core.Errno;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Arrays;

/**
 * The active messages that carry every request between UCX QPs (RDMA WRITE and READ, SEND,
 * SEND_WITH_INV, SEND_WITH_IMM, WRITE_WITH_IMM, the atomics), the acknowledgements that complete them at the sender (a request
 * completes, as on a reliable connection, once the target executed it, with the target's verdict),
 * and READ responses. The target checks every remote access against its own key tables inside a
 * grace-period section, exactly as the soft provider does, so a key that was revoked, a region that
 * was deregistered or a range outside it fails with REM_ACCESS_ERR and touches nothing.
 *
 * <p>Every message is one AM (id {@link #ID}) with a 64-byte header:
 * <pre>
 *   0 type (MSG 1, ACK 2, READ_RESPONSE 3)   4 destination QP number   8 source QP number
 *  12 opcode ordinal   16 sender's sequence   24 immediate   28 rkey to invalidate
 *  32 remote address   40 target rkey   44 status (ACK, READ_RESPONSE), or a MSG's flags (bits
 *     0-2 its sender's RNR retry count, bit 8 solicited)   48 length (READ)
 *  56 connection token: the random number the destination QP gave its peer in the authenticated
 *     handshake; a message without it is dropped, so no other connection (nor anybody who only
 *     knows a worker address) can speak for this one
 * </pre>
 * An atomic's message carries its operands as 16 bytes of data (compare-or-add, swap); the target
 * executes it under the same checks and answers with a READ_RESPONSE of the 8 bytes it found.
 * Native byte order: both ends are the same kind of machine (UCX's own wire formats assume it too).
 * An RDMA WRITE or a READ's answer of at least the device's rendezvous threshold travels by UCX's
 * rendezvous protocol: the header arrives first, the target checks it exactly as an eager message's,
 * and only then has UCX move the bytes, once, straight into the checked range (a WRITE) or out of it
 * (a READ's answer, received straight into the initiator's entries).
 * The callback ({@link #received}) runs inside {@code ucp_worker_progress}, under the receiving
 * device's worker lock: it only records, never takes a QP lock, and never throws.
 */
final class UcxAm {
    static final int ID = 7;
    static final long HEADER = 64;
    static final int TYPE_MSG = 1;
    static final int TYPE_ACK = 2;
    /** An RDMA READ's answer: the status and, on success, the bytes. */
    static final int TYPE_READ_RESPONSE = 3;
    static final long H_TYPE = 0;
    static final long H_DST = 4;
    static final long H_SRC = 8;
    static final long H_OPCODE = 12;
    static final long H_SEQ = 16;
    static final long H_IMM = 24;
    static final long H_INV = 28;
    static final long H_RADDR = 32;
    static final long H_RKEY = 40;
    static final long H_STATUS = 44;
    static final long H_LENGTH = 48;
    static final long H_TOKEN = 56;
    /** A MSG's flags (in the status slot): the sender's RNR retry count, and solicited. */
    static final int FLAG_RNR_MASK = 7;
    static final int FLAG_SOLICITED = 0x100;

    /**
     * The window of a connection: requests a QP has started and not yet reaped (sent, their answers
     * not yet processed), at most this many, carrying (or, for READs, asking for) at most
     * {@link #WINDOW_BYTES} bytes unless it is the only one. A sender keeps to it; a target holds at
     * most that much of one connection's (waiting messages, READ answers under way), and a peer that
     * sends more breaks the protocol: its connection ends (see {@link UcxDevice#onMessage}).
     */
    static final int WINDOW_MESSAGES = 32768;
    /** The bytes of a connection's window ({@link #WINDOW_MESSAGES}): 64 MiB. */
    static final long WINDOW_BYTES = 64L << 20;

    /** An atomic's message data: compare-or-add at 0, swap at 8 (its answer is a READ_RESPONSE of the 8 bytes found). */
    static final long ATOMIC_OPERANDS = 16;

    /** The opcodes and statuses by ordinal, read on the data path ({@code values()} copies its array each call). */
    static final Opcode[] OPCODES = Opcode.values();
    static final WcStatus[] STATUSES = WcStatus.values();

    private static final MethodHandle RECEIVED;
    /** Pointers as {@code long}: a pointer-typed upcall argument is a new {@code MemorySegment} per message. */
    private static final FunctionDescriptor CALLBACK = FunctionDescriptor.of(JAVA_INT, Ucp.PTR, Ucp.PTR, JAVA_LONG,
            Ucp.PTR, JAVA_LONG, Ucp.PTR);

    /** Devices by number (the handler's argument); a closed device's slot is null. Copy-on-write under UcxAm.class. */
    private static volatile UcxDevice[] devices = new UcxDevice[0];

    static {
        try {
            RECEIVED = MethodHandles.lookup().findStatic(UcxAm.class, "received", MethodType.methodType(int.class,
                    long.class, long.class, long.class, long.class, long.class, long.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private UcxAm() {
    }

    /**
     * Gives {@code device} a number and installs the handler on its main worker (serial 0); the
     * handler's stub is made in {@code arena} and kept for the device's other workers ({@link #installOn}).
     */
    static synchronized int install(UcxDevice device, Arena arena) {
        UcxDevice[] d = devices;
        int number = d.length;
        for (int i = 0; i < d.length; i++) {
            if (d[i] == null) {
                number = i;
                break;
            }
        }
        UcxDevice[] next = Arrays.copyOf(d, Math.max(d.length, number + 1));
        next[number] = device;
        devices = next;
        try {
            device.amStub = Linker.nativeLinker().upcallStub(RECEIVED, CALLBACK, arena);
            installOn(device, number, device.worker, 0);
        } catch (RuntimeException e) {
            uninstall(number);
            throw e;
        }
        return number;
    }

    /**
     * Installs the handler on a worker of device {@code number}: its argument carries the device's
     * number (low 32 bits) and the worker's channel serial (high 32 bits), so that a message is taken
     * only by a QP of the channel whose worker received it.
     */
    static void installOn(UcxDevice device, int number, UcpWorker worker, int serial) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = UcpAmHandlerParam.of(a, ID, device.amStub, ((long) serial << 32) | number);
            device.ucp.check(device.ucp.setAmHandler(worker.handle, p), Errno.EIO, "ucx: ucp_worker_set_am_recv_handler");
        }
    }

    /** The open devices of this JVM (null slots for closed ones). */
    static UcxDevice[] devices() {
        return devices;
    }

    /** Frees a device's number (after its worker is destroyed: no callback can come any more). */
    static synchronized void uninstall(int number) {
        UcxDevice[] next = devices.clone();
        next[number] = null;
        devices = next;
    }

    /**
     * The AM callback: finds the device and hands it the message. Returns {@code UCS_INPROGRESS} when
     * the data is kept (released later with {@code ucp_am_data_release}, or, a rendezvous message's
     * descriptor, received later with {@code ucp_am_recv_data_nbx}), else {@code UCS_OK} (a
     * rendezvous descriptor neither received nor kept is dropped, and its sender's send completes).
     */
    @SuppressWarnings("unused") // called by UCX through the upcall stub
    private static int received(long arg, long header, long headerLength, long data, long length, long param) {
        try {
            UcxDevice[] d = devices;
            long number = arg & 0xffff_ffffL;
            if (headerLength != HEADER || header == 0 || param == 0 || number < 0 || number >= d.length
                    || d[(int) number] == null) {
                return UcpLayout.UCS_OK; // not ours, or a device already closing: dropped
            }
            long attr = UcpAmHandlerParam.recvAttr(param);
            boolean persistent = (attr & UcpLayout.AM_RECV_ATTR_FLAG_DATA) != 0;
            boolean rndv = (attr & UcpLayout.AM_RECV_ATTR_FLAG_RNDV) != 0;
            UcxDevice device = d[(int) number];
            MemorySegment h = device.amHeader; // worker lock held: the device's one header buffer is free
            MemorySegment.copy(Ucp.NATIVE, header, h, 0, HEADER);
            return device.onMessage(h, (int) (arg >>> 32), data, length, persistent, rndv)
                    ? UcpLayout.UCS_INPROGRESS : UcpLayout.UCS_OK;
        } catch (Throwable t) {
            try {
                UcxDevice[] d = devices;
                long number = arg & 0xffff_ffffL;
                if (number < d.length && d[(int) number] != null) {
                    UcxDevice device = d[(int) number];
                    device.messages.lastCallbackFailure = t;
                    device.messages.callbackFailures++; // (worker lock held: one writer)
                }
            } catch (Throwable ignored) {
                // nothing more can be done here
            }
            return UcpLayout.UCS_OK; // never let an exception unwind into UCX (it would kill the JVM)
        }
    }
}
