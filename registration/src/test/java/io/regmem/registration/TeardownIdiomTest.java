package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The documented teardown for error paths (verbs.md, "Teardown on an error path"): an application
 * that fails midway, with a connection up, receives posted, regions registered and a CQ on a
 * completion channel, leaves nothing open when its {@code finally} calls {@code forceClose()}; on the
 * clean path, after {@code close()}, {@code forceClose()} does nothing. A plain try-with-resources
 * leaves the device open ({@code EBUSY}, suppressed) until something closes it.
 */
@ExtendWith(NoLeaks.class)
class TeardownIdiomTest {
    private static final AtomicInteger NAMES = new AtomicInteger();

    /** A connected pair with everything a real application has, then a failure. */
    private static void failMidway(RdmaDevice a, RdmaDevice b, Arena arena) {
        MemorySegment mem = arena.allocate(65536, 4096);
        ProtectionDomain pdA = a.allocPd();
        ProtectionDomain pdB = b.allocPd();
        CompletionChannel channel = b.createCompletionChannel();
        CompletionQueue cqA = a.createCq(64);
        CompletionQueue cqB = b.createCq(64, channel);
        MemoryRegion mrA = pdA.register(mem.asSlice(0, 32768), Access.LOCAL_WRITE);
        MemoryRegion mrB = pdB.register(mem.asSlice(32768, 32768), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        CmId listener = b.createCmId();
        String address = Providers.address(Providers.NAME, "teardown-" + NAMES.incrementAndGet());
        listener.listen(address);
        CmId active = a.createCmId();
        active.createQp(pdA, new QpInitAttributes().sendCq(cqA).recvCq(cqA).maxSendWr(8).maxRecvWr(8));
        active.connect(address);
        CmId passive = Providers.awaitRequest(listener);
        QueuePair qpB = passive.createQp(pdB, new QpInitAttributes().sendCq(cqB).recvCq(cqB).maxSendWr(8).maxRecvWr(8));
        passive.accept();
        active.awaitConnected(10, TimeUnit.SECONDS);
        qpB.postRecv(new WorkRequest(1).wrId(1).addSge(mem.address() + 32768, 64, mrB.lkey()));
        cqB.requestNotify(false);
        assertThat(mrA.lkey()).isNotZero();
        throw new IllegalStateException("the application failed here");
    }

    @Test
    void forceCloseInFinallyLeavesNothingOpenAfterAFailure() {
        RdmaDevice a = Providers.open();
        RdmaDevice b = Providers.open();
        String[] reports = new String[2];
        try (Arena arena = Arena.ofShared()) {
            try {
                failMidway(a, b, arena);
                a.close();
                b.close();
            } finally {
                reports[0] = a.forceClose();
                reports[1] = b.forceClose();
            }
        } catch (IllegalStateException expected) {
            assertThat(expected).hasMessage("the application failed here");
        }
        assertThat(a.isClosed()).isTrue();
        assertThat(b.isClosed()).isTrue();
        assertThat(reports[0]).contains("QueuePair", "CmId", "MemoryRegion", "CompletionQueue", "ProtectionDomain");
        assertThat(reports[1]).contains("QueuePair", "CmId", "MemoryRegion", "CompletionQueue", "CompletionChannel",
                "ProtectionDomain");
        assertThat(RdmaDevice.openDevices()).doesNotContain(a, b);
    }

    @Test
    void afterACleanCloseForceCloseDoesNothing() {
        RdmaDevice d = Providers.open();
        try {
            ProtectionDomain pd = d.allocPd();
            pd.close();
            d.close();
        } finally {
            assertThat(d.forceClose()).isEqualTo("no live objects");
        }
        assertThat(d.isClosed()).isTrue();
    }

    @Test
    void aPlainTryWithResourcesLeavesTheDeviceOpenUntilSomethingClosesIt() {
        RdmaDevice[] held = new RdmaDevice[1];
        assertThatThrownBy(() -> {
            try (RdmaDevice d = Providers.open()) {
                held[0] = d;
                d.allocPd();
                throw new IllegalStateException("failed");
            }
        }).isInstanceOf(IllegalStateException.class)
                .satisfies(e -> assertThat(e.getSuppressed()).singleElement()
                        .satisfies(s -> assertThat(((RdmaException) s).errno()).isEqualTo(Errno.EBUSY)));
        assertThat(held[0].isClosed()).as("EBUSY: still open").isFalse();
        assertThat(held[0].forceClose()).contains("ProtectionDomain");
        assertThat(held[0].isClosed()).isTrue();
    }
}
