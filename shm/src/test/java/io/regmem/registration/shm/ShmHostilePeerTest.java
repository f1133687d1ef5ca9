package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.link.Link;
import io.regmem.registration.testkit.LogCapture;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A peer that holds the secret and then writes garbage into the lane: records of every type with
 * absurd lengths, offsets, sequence numbers, keys, opcodes, modes and scatter lists (pointing
 * anywhere, the target's own memory included), torn tails and headers, READs asking for grants and
 * copied words that move anywhere. The target, polling all the while, never crashes or hangs, never
 * writes outside the range its real key grants (canaries before and after it stay intact, and the
 * part of the range the key does not cover too), never grants a READ outside it, ends each broken
 * connection with one log line, and is left with nothing at the end.
 */
@ExtendWith(NoLeaks.class)
class ShmHostilePeerTest {
    private static final String SECRET = "hostile-peer-test-secret-0123456789";
    private static final long RING = 64L << 10;
    private static final byte CANARY = (byte) 0xC3;
    private LogCapture log;

    @BeforeEach
    void listen() {
        log = new LogCapture("io.regmem.registration.shm");
    }

    @AfterEach
    void quiet() {
        log.close();
    }

    @Test
    void garbageInTheRingsNeverTakesTheTargetOutsideItsCheckedRange() throws Exception {
        int port = ShmProcessTest.freePort();
        SplittableRandom r = new SplittableRandom(2026);
        try (Arena arena = Arena.ofShared();
             RdmaDevice dev = RdmaDevice.open("shm", Map.of("secret", SECRET, "ringBytes", Long.toString(RING),
                     "handshakeTimeoutMillis", "5000"))) {
            // [canary 64 KiB][granted 256 KiB][canary 64 KiB]; the recv buffers are a region of their own.
            MemorySegment all = arena.allocate(384 << 10, 4096);
            all.fill(CANARY);
            MemorySegment granted = all.asSlice(64 << 10, 256 << 10);
            granted.fill((byte) 0);
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mr = pd.register(granted, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_ATOMIC);
            MemorySegment recvMem = arena.allocate(64 << 10, 4096);
            MemoryRegion recvMr = pd.register(recvMem, Access.LOCAL_WRITE);
            CompletionQueue cq = dev.createCq(1024);
            CmId listener = dev.createCmId();
            listener.listen("127.0.0.1:" + port);
            WorkCompletion[] wcs = new WorkCompletion[64];
            for (int i = 0; i < wcs.length; i++) {
                wcs[i] = new WorkCompletion();
            }
            int connections = 0;
            int broken = 0;
            long records = 0;
            long[] verdicts = new long[3]; // successes and refusals the target answered; its finished word as last seen
            long[] seq = new long[1];
            long until = System.nanoTime() + 8_000_000_000L;
            while (connections < 300 && System.nanoTime() < until) {
                connections++;
                // The hostile requester: the real handshake, then its own rings to scribble in.
                Link l = Link.connect("hostile", ShmCm.KIND, "127.0.0.1", port, SECRET.getBytes(StandardCharsets.UTF_8), 5000);
                AtomicReference<Lane> laneRef = new AtomicReference<>();
                AtomicReference<Throwable> failure = new AtomicReference<>();
                Thread hostile = Thread.ofPlatform().start(() -> {
                    try {
                        l.readChallenge(l.deadline());
                        l.sendHello(0, Link.token(), LaneSetup.offer(RING).encode(), new byte[0]);
                        Link.Peer p = (Link.Peer) l.readAnswer(l.deadline(), () -> { });
                        laneRef.set(LaneSetup.join(LaneOffer.decode(p.address(), true), RING, l.deadline(), true, false));
                        l.sendReady();
                    } catch (Throwable t) {
                        failure.set(t);
                    }
                });
                CmId id = null;
                long deadline = System.nanoTime() + 10_000_000_000L;
                while ((id = listener.getRequest()) == null) {
                    assertThat(System.nanoTime()).as("the request arrives").isLessThan(deadline);
                    Thread.sleep(1);
                }
                QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(32).maxRecvWr(8)
                        .maxRecvSge(1));
                WorkRequest w = new WorkRequest(1);
                for (int i = 0; i < 8; i++) {
                    qp.postRecv(w.reset().wrId(i).addSge(recvMem.address() + 8192L * i, 8192, recvMr.lkey()));
                }
                id.accept();
                hostile.join(10_000);
                assertThat(failure.get()).isNull();
                Lane lane = laneRef.get();
                try {
                    seq[0] = 0;
                    for (int burst = 0; burst < 40 && qp.state() == QueuePair.State.RTS; burst++) {
                        records += r.nextInt(3) > 0 ? wellFormed(lane, r, seq, granted.address(), mr.rkey(), all.address())
                                : scribble(lane, r, granted.address(), mr.rkey(), all.address());
                        readVerdicts(lane, verdicts, r, granted.address());
                        for (int k = 0; k < 4; k++) {
                            cq.poll(wcs); // the target serves (and, for a SEND that fits, completes a receive)
                        }
                    }
                } finally {
                    lane.leave();
                    lane.close();
                    l.close();
                }
                if (qp.state() == QueuePair.State.ERROR) {
                    broken++;
                }
                while (qp.outstandingRecvs() > 0 || cq.poll(wcs) > 0) {
                    cq.poll(wcs);
                    if (id.connState() == CmId.ConnState.CONNECTED) {
                        id.disconnect();
                    }
                }
                id.destroyQp();
                id.close();
                for (long i = 0; i < 64 << 10; i++) {
                    if (all.get(JAVA_BYTE, i) != CANARY || all.get(JAVA_BYTE, (320 << 10) + i) != CANARY) {
                        throw new AssertionError("connection " + connections + ": a canary byte changed at " + i);
                    }
                }
            }
            System.out.println("shm hostile peer: " + connections + " connections, " + records + " hostile records, "
                    + verdicts[0] + " executed, " + verdicts[1] + " refused, " + broken + " connections ended by the target");
            assertThat(verdicts[0]).as("well-formed hostile requests inside the range execute").isPositive();
            assertThat(verdicts[1]).as("requests outside the range are refused").isPositive();
            assertThat(connections).isGreaterThan(20);
            assertThat(broken).as("garbage ends connections").isGreaterThan(connections / 2);
            assertThat(log.text()).contains("the connection ends");
            listener.close();
            cq.close();
            mr.close();
            recvMr.close();
            pd.close();
            assertThat(dev.resources().survivors()).isEmpty();
        }
    }

    /**
     * A burst of requests that keep the wire's rules (increasing sequence numbers, known opcodes, the
     * shape each mode needs) but aim anywhere around the granted range, with the real key or another,
     * and pull from anywhere around it in this process. Returns how many.
     */
    private static int wellFormed(Lane lane, SplittableRandom r, long[] seq, long granted, int rkey, long near) {
        Ring ring = lane.myRequests;
        MemorySegment m = ring.segment();
        io.regmem.registration.Opcode[] ops = {io.regmem.registration.Opcode.RDMA_WRITE,
            io.regmem.registration.Opcode.RDMA_READ, io.regmem.registration.Opcode.SEND,
            io.regmem.registration.Opcode.RDMA_WRITE_WITH_IMM, io.regmem.registration.Opcode.ATOMIC_FETCH_AND_ADD,
            io.regmem.registration.Opcode.ATOMIC_CMP_AND_SWP};
        int n = 0;
        for (int i = 0; i < 1 + r.nextInt(4); i++) {
            io.regmem.registration.Opcode op = ops[r.nextInt(ops.length)];
            boolean data = Wire.carriesData(op);
            boolean pull = (data || Wire.isRead(op)) && r.nextBoolean(); // a READ in PULL mode asks for a grant
            long total = Wire.isAtomic(op) ? 8 : r.nextLong(0, 600);
            int entries = pull && data ? 1 + r.nextInt(3) : 0;
            if (pull && total < entries) {
                total = entries;
            }
            int length = Wire.REQ_HEADER + (pull ? 16 * entries : data ? (int) total : 0);
            if (pull && !data && total == 0) {
                total = 1;
            }
            long at = ring.claim(Wire.REQ, length);
            if (at < 0) {
                break;
            }
            m.set(JAVA_LONG, at + Wire.R_SEQ, ++seq[0]);
            m.set(JAVA_BYTE, at + Wire.R_OPCODE, (byte) op.ordinal());
            m.set(JAVA_BYTE, at + Wire.R_MODE, (byte) (pull ? Wire.MODE_PULL : Wire.MODE_INLINE));
            m.set(JAVA_SHORT, at + Wire.R_FLAGS, (short) 0);
            m.set(JAVA_INT, at + Wire.R_IMM, r.nextInt());
            m.set(JAVA_LONG, at + Wire.R_RADDR, granted + r.nextLong(-8192, (256 << 10) + 8192));
            m.set(JAVA_INT, at + Wire.R_RKEY, r.nextInt(8) > 0 ? rkey : r.nextInt());
            m.set(JAVA_INT, at + Wire.R_ENTRIES, entries);
            m.set(JAVA_LONG, at + Wire.R_TOTAL, total);
            m.set(JAVA_LONG, at + Wire.R_CMP, r.nextLong());
            m.set(JAVA_LONG, at + Wire.R_SWAP, r.nextLong());
            long left = total;
            for (int e = 0; e < entries; e++) {
                long len = e == entries - 1 ? left : 1 + r.nextLong(0, left - (entries - 1 - e));
                left -= len;
                m.set(JAVA_LONG, at + Wire.REQ_HEADER + 16L * e, r.nextInt(4) > 0 ? near + r.nextLong(0, 384 << 10) : r.nextLong());
                m.set(JAVA_LONG, at + Wire.REQ_HEADER + 16L * e + 8, len);
            }
            for (long k = 0; !pull && data && k < total; k++) {
                m.set(JAVA_BYTE, at + Wire.REQ_HEADER + k, (byte) r.nextInt());
            }
            n++;
        }
        ring.publish();
        return n;
    }

    /**
     * Reads the target's answers off its answer ring (this side consumes it) and its finished word:
     * counts successes (a READ's or atomic's answer or grant, or the finished word moving) and
     * refusals. A grant must name only memory inside the granted range; this side then says it copied
     * it (or, now and then, moves its copied word anywhere).
     */
    private static void readVerdicts(Lane lane, long[] verdicts, SplittableRandom r, long granted) {
        Ring answers = lane.peerAnswers;
        long finished = lane.peerFinished();
        if (finished != verdicts[2]) {
            verdicts[2] = finished;
            verdicts[0]++;
        }
        try {
            while (answers.next()) {
                if (answers.type == Wire.ACK) {
                    int status = answers.segment().get(JAVA_INT, answers.payload + Wire.A_STATUS);
                    verdicts[status == 0 ? 0 : 1]++;
                } else if (answers.type == Wire.RGRANT) {
                    MemorySegment m = answers.segment();
                    int n = m.get(JAVA_INT, answers.payload + Wire.G_ENTRIES);
                    for (int e = 0; e < n; e++) {
                        long a = m.get(JAVA_LONG, answers.payload + Wire.GRANT_HEADER + 16L * e);
                        long len = m.get(JAVA_LONG, answers.payload + Wire.GRANT_HEADER + 16L * e + 8);
                        if (a < granted || len <= 0 || a + len > granted + (256 << 10)) {
                            throw new AssertionError("a grant names " + len + " bytes at 0x" + Long.toHexString(a)
                                    + ", outside the range its key grants");
                        }
                    }
                    verdicts[0]++;
                    lane.copied(r.nextInt(16) == 0 ? r.nextLong() : m.get(JAVA_LONG, answers.payload + Wire.G_SEQ));
                }
                answers.consume();
            }
            answers.release();
        } catch (Ring.Violation targetIsHonest) {
            throw new AssertionError("the target broke its own ring: " + targetIsHonest.getMessage());
        }
    }

    /**
     * Writes a burst of records into the hostile side's request and answer rings: some well formed
     * with random fields, some torn or absurd. Returns how many.
     */
    private static int scribble(Lane lane, SplittableRandom r, long granted, int rkey, long near) {
        Ring ring = r.nextInt(4) == 0 ? lane.myAnswers : lane.myRequests;
        MemorySegment m = ring.segment();
        int n = 0;
        for (int i = 0; i < 1 + r.nextInt(6); i++) {
            int kind = r.nextInt(10);
            int type = kind < 6 ? Wire.REQ : kind == 6 ? Wire.DATA : kind == 7 ? Wire.ABORT : kind == 8 ? Wire.ACK : r.nextInt();
            int length = kind < 6 ? Wire.REQ_HEADER + (r.nextBoolean() ? 0 : 16 * r.nextInt(0, 5)) : r.nextInt(0, 600);
            long at = ring.claim(type, Math.max(0, Math.min(length, ring.maxPayload)));
            if (at < 0) {
                break;
            }
            for (long k = 0; k + 8 <= length && k < ring.maxPayload; k += 8) {
                m.set(JAVA_LONG, at + k, r.nextLong());
            }
            if (type == Wire.REQ) {
                m.set(JAVA_LONG, at + Wire.R_SEQ, r.nextInt(3) == 0 ? r.nextLong() : 1000L * n + r.nextInt(0, 5000));
                m.set(JAVA_BYTE, at + Wire.R_OPCODE, (byte) r.nextInt(0, 16));
                m.set(JAVA_BYTE, at + Wire.R_MODE, (byte) r.nextInt(0, 4));
                m.set(JAVA_SHORT, at + Wire.R_FLAGS, (short) r.nextInt(0, 0x200));
                long address = switch (r.nextInt(4)) {
                    case 0 -> granted + r.nextLong(0, 256 << 10);
                    case 1 -> near + r.nextLong(0, 384 << 10);
                    case 2 -> granted - r.nextLong(0, 4096);
                    default -> r.nextLong();
                };
                m.set(JAVA_LONG, at + Wire.R_RADDR, address);
                m.set(JAVA_INT, at + Wire.R_RKEY, r.nextInt(3) > 0 ? rkey : r.nextInt());
                m.set(JAVA_INT, at + Wire.R_ENTRIES, r.nextInt(3) == 0 ? r.nextInt() : (length - Wire.REQ_HEADER) / 16);
                long total = switch (r.nextInt(4)) {
                    case 0 -> length - Wire.REQ_HEADER;
                    case 1 -> r.nextLong(0, 1 << 20);
                    case 2 -> 8;
                    default -> r.nextLong();
                };
                m.set(JAVA_LONG, at + Wire.R_TOTAL, total);
                for (long e = at + Wire.REQ_HEADER; e + 16 <= at + length; e += 16) {
                    m.set(JAVA_LONG, e, r.nextBoolean() ? near + r.nextLong(0, 384 << 10) : r.nextLong());
                    m.set(JAVA_LONG, e + 8, r.nextBoolean() ? r.nextLong(1, 70_000) : r.nextLong());
                }
            }
            n++;
        }
        ring.publish();
        if (r.nextInt(8) == 0) { // a torn or absurd record header somewhere in the data
            long at = Ring.HEADER + 8 * r.nextLong(0, ring.capacity() / 8);
            m.set(JAVA_LONG, at, r.nextBoolean() ? r.nextLong() : (long) r.nextInt(0, 20) << 32 | 8 * r.nextInt(-4, 600));
        }
        return n;
    }
}
