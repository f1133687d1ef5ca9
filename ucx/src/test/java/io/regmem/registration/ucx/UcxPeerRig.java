package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

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
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;

/**
 * What the tests between this JVM and child JVMs ({@link UcxChild}, {@link UcxPeerMain}) share: a ucx
 * device with a PD, a CQ and 4 MiB of registered memory; connecting to a child and importing the key
 * it exports; waiting for a completion; READing the child's pattern byte by byte; closing a
 * connection; and a teardown that kills every child and ends with nothing left on the device.
 */
abstract class UcxPeerRig {
    protected final List<UcxChild> children = new ArrayList<>();
    protected final Arena arena = Arena.ofShared();
    protected RdmaDevice dev;
    protected ProtectionDomain pd;
    protected CompletionQueue cq;
    protected MemorySegment mem;
    protected MemoryRegion mr;
    protected final WorkCompletion[] one = {new WorkCompletion()};
    /** The child's KEY line of the last {@link #connect}. */
    protected String lastKeyLine;

    /** A connection to a child: the ID, QP and the key it exported. */
    protected record Conn(CmId id, QueuePair qp, int key, long remote, byte[] exported) {
    }

    protected void open(Map<String, String> options) {
        UcxAvailable.require();
        dev = RdmaDevice.open("ucx", options);
        pd = dev.allocPd();
        cq = dev.createCq(256);
        mem = arena.allocate(4 << 20, 4096);
        mr = pd.register(mem, Access.LOCAL_WRITE);
    }

    protected Conn connect(UcxChild c) throws Exception {
        CmId id = dev.createCmId();
        QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(128).maxRecvWr(16).maxSendSge(4));
        id.connect(c.address);
        String line = c.expect("KEY ");
        lastKeyLine = line;
        String[] key = line.split(" ");
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (id.connState() != CmId.ConnState.CONNECTED) {
            assertThat(System.nanoTime()).as("connected within 10 s (state %s)", id.connState()).isLessThan(deadline);
            Thread.sleep(1);
        }
        assertThat(qp.state()).isEqualTo(QueuePair.State.RTS);
        if (key[1].equals("none")) { // (the child's region is deregistered)
            return new Conn(id, qp, 0, 0, null);
        }
        byte[] exported = HexFormat.of().parseHex(key[1]);
        int handle = qp.importRemoteKey(MemorySegment.ofArray(exported));
        return new Conn(id, qp, handle, Long.parseLong(key[2]), exported);
    }

    protected WorkCompletion await() {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(one) == 0) {
            assertThat(System.nanoTime()).as("a completion within 10 s").isLessThan(deadline);
        }
        return one[0];
    }

    protected void close(Conn c) {
        c.id().disconnect();
        while (cq.poll(one) > 0) {
            // flushed
        }
        c.id().destroyQp();
        c.id().close();
    }

    @AfterEach
    void tearDown() throws Exception {
        for (UcxChild c : children) {
            c.process.destroyForcibly();
            c.process.waitFor(30, TimeUnit.SECONDS);
        }
        if (dev != null) {
            if (mr != null && !mr.isDestroyed()) {
                mr.close();
            }
            for (CmId id : dev.resources().survivors(CmId.class)) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
            cq.close();
            pd.close();
            assertThat(dev.resources().survivors()).as(dev.resources().report()).isEmpty();
            dev.close();
        }
        arena.close();
    }

    /** READs 64 KiB of the child's pattern from {@code offset} and checks every byte. */
    protected void readsThePattern(Conn c, long offset) {
        c.qp().postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_READ).signaled(true)
                .addSge(mem.address(), 65536, mr.lkey()).remote(c.remote() + offset, c.key()));
        assertThat(await().status()).isEqualTo(WcStatus.SUCCESS);
        for (int i = 0; i < 65536; i++) {
            assertThat(mem.get(ValueLayout.JAVA_BYTE, i)).as("byte %d", i).isEqualTo(UcxPeerMain.pattern(offset + i));
        }
    }
}
