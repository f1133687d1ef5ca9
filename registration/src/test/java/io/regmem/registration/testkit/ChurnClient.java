package io.regmem.registration.testkit;

import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HexFormat;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The client process of {@link Churn}: connect / WRITE 1 B-1 MiB / READ back / check / disconnect
 * cycles against one listener, each cycle a new CM ID and QP, printing {@code REGMEM CYCLE} after
 * each. It may end itself abruptly ({@code Runtime.halt}, as a SIGKILL would: no clean-up) at a
 * chosen point of a chosen cycle: mid-handshake, mid-copy (a 1 MiB WRITE and READ posted),
 * mid-ring-write (a thread halts the process while this one posts small WRITEs), during close.
 *
 * <p>Arguments: provider, address, options ({@code k=v,k=v}), hex remote key, remote address, slot
 * (its 2 MiB of the listener's region), seed, where to die ({@code none|handshake|copy|ring|close}),
 * the cycle to die in (or the cycles to run for {@code none}).
 */
public final class ChurnClient {
    /** Each client's part of the listener's region. */
    public static final long SLOT = 2L << 20;
    private static final long MAX = 1L << 20;

    private ChurnClient() {
    }

    public static void main(String[] args) throws Exception {
        String provider = args[0];
        String address = args[1];
        Map<String, String> options = ChildSide.options(args, 2);
        byte[] key = HexFormat.of().parseHex(args[3]);
        long remote = Long.parseLong(args[4]) + Long.parseLong(args[5]) * SLOT;
        SplittableRandom r = new SplittableRandom(Long.parseLong(args[6]));
        String die = args[7];
        int at = Integer.parseInt(args[8]);
        try (Arena arena = Arena.ofShared(); RdmaDevice dev = RdmaDevice.open(provider, options)) {
            MemorySegment out = arena.allocate(MAX, 4096);
            MemorySegment in = arena.allocate(MAX, 4096);
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mrOut = pd.register(out, Access.LOCAL_WRITE);
            MemoryRegion mrIn = pd.register(in, Access.LOCAL_WRITE);
            CompletionQueue cq = dev.createCq(64);
            WorkRequest w = new WorkRequest(1);
            WorkCompletion[] wcs = new WorkCompletion[32];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            for (int cycle = 0; die.equals("none") ? cycle < at : true; cycle++) {
                boolean dying = !die.equals("none") && cycle == at;
                CmId id = dev.createCmId();
                QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(32).maxRecvWr(1));
                int rkey = qp.importRemoteKey(key);
                id.connect(address);
                if (dying && die.equals("handshake")) {
                    LockSupport.parkNanos(r.nextLong(2_000_000L));
                    halt();
                }
                try {
                    id.awaitConnected(30, TimeUnit.SECONDS);
                } catch (RdmaException e) {
                    fail("cycle " + cycle + ": not connected: " + e.getMessage() + "; " + qp.diagnostics());
                }
                if (dying && die.equals("copy")) {
                    post(qp, w, Opcode.RDMA_WRITE, out, MAX, mrOut, remote, rkey);
                    post(qp, w, Opcode.RDMA_READ, in, MAX, mrIn, remote, rkey);
                    LockSupport.parkNanos(r.nextLong(500_000L));
                    halt();
                }
                if (dying && die.equals("ring")) {
                    long after = r.nextLong(300_000L);
                    Thread.ofPlatform().daemon().start(() -> {
                        LockSupport.parkNanos(after);
                        halt();
                    });
                    for (long i = 0; ; i++) { // small WRITEs travel in the ring's records
                        if (qp.outstandingSends() < 32) {
                            post(qp, w, Opcode.RDMA_WRITE, out, 1 + (i % 64), mrOut, remote + (i % 64) * 64, rkey);
                        }
                        cq.poll(wcs);
                    }
                }
                long size = 1 + r.nextLong(MAX);
                for (long i = 0; i < (size + 7) / 8; i++) { // (MAX is a multiple of 8)
                    out.set(ValueLayout.JAVA_LONG, i * 8, r.nextLong());
                }
                in.asSlice(0, size).fill((byte) 0);
                post(qp, w, Opcode.RDMA_WRITE, out, size, mrOut, remote, rkey);
                await(cq, wcs, cycle, "WRITE");
                post(qp, w, Opcode.RDMA_READ, in, size, mrIn, remote, rkey);
                await(cq, wcs, cycle, "READ");
                long mismatch = out.asSlice(0, size).mismatch(in.asSlice(0, size));
                if (mismatch >= 0) {
                    fail("cycle " + cycle + ": " + size + " bytes read back differ at " + mismatch);
                }
                id.disconnect();
                if (dying && die.equals("close")) {
                    halt();
                }
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (qp.outstandingSends() + qp.outstandingRecvs() > 0) {
                    cq.poll(wcs);
                    if (System.nanoTime() > deadline) {
                        fail("cycle " + cycle + ": requests still outstanding after the disconnect");
                    }
                }
                id.destroyQp();
                id.close();
                System.out.println("REGMEM CYCLE " + cycle + " " + size);
                System.out.flush();
            }
            mrOut.close();
            mrIn.close();
            cq.close();
            pd.close();
            System.out.println(dev.resources().survivors().isEmpty() ? "REGMEM CLEAN" : "REGMEM LEFT " + dev.resources().report());
            System.out.flush();
        }
    }

    private static void post(QueuePair qp, WorkRequest w, Opcode op, MemorySegment local, long size, MemoryRegion mr,
                             long remote, int rkey) {
        qp.postSend(w.reset().wrId(op.ordinal()).opcode(op).signaled(true).addSge(local.address(), size, mr.lkey())
                .remote(remote, rkey));
    }

    private static void await(CompletionQueue cq, WorkCompletion[] wcs, int cycle, String what) {
        long deadline = System.nanoTime() + 30_000_000_000L;
        WorkCompletion[] one = {wcs[0]};
        while (true) {
            if (cq.poll(one) == 1) {
                if (wcs[0].status() != WcStatus.SUCCESS) {
                    fail("cycle " + cycle + ": the " + what + " completed " + wcs[0].status());
                }
                return;
            }
            if (System.nanoTime() > deadline) {
                fail("cycle " + cycle + ": the " + what + " did not complete in 30 s");
            }
        }
    }

    private static void halt() {
        System.out.flush();
        Runtime.getRuntime().halt(137);
    }

    private static void fail(String why) {
        System.out.println("REGMEM FAILED " + why);
        System.out.flush();
        Runtime.getRuntime().halt(1);
    }
}
