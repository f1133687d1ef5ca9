package io.regmem.registration;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Refused;
import io.regmem.registration.testkit.Providers;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * kernel-semantics section 5, invariants 1-4 and 17, and the rows of section 1's "Violations"
 * table that the object model decides, on the soft provider.
 */
@ExtendWith(NoLeaks.class)
class ObjectModelTest {
    private final Arena arena = Arena.ofShared();
    private final MemorySegment memory = arena.allocate(1 << 16, 4096);
    private RdmaDevice device = Providers.open();

    @AfterEach
    void nothingLeaked() {
        assertThat(device.resources().survivors()).as(device.resources().report()).isEmpty();
        device.close();
        arena.close();
    }

    static void assertRdma(ThrowingCallable call, Errno errno, String... parts) {
        Refused.assertRdma(call, errno, parts);
    }

    @Test
    @org.junit.jupiter.api.Tag("soft-only")
    void providersAreFoundByNameAndTakeOptions() {
        try (RdmaDevice soft = RdmaDevice.open("soft")) {
            assertThat(soft.providerName()).isEqualTo("soft");
            assertThat(soft.name()).matches("soft[0-9]+");
            assertThat(soft.attributes()).isEqualTo(DeviceAttributes.defaults());
        }
        try (RdmaDevice small = RdmaDevice.open("soft", Map.of("maxSendSge", "2", "maxFastRegPageListLen", "8",
                "maxQpWr", "4", "iWarp", "true"))) {
            assertThat(small.attributes().maxSendSge()).isEqualTo(2);
            assertThat(small.attributes().maxFastRegPageListLen()).isEqualTo(8);
            assertThat(small.attributes().maxQpWr()).isEqualTo(4);
            assertThat(small.attributes().iWarp()).isTrue();
        }
        assertRdma(() -> RdmaDevice.open("nonesuch"), Errno.ENOENT, "nonesuch", "soft");
        assertRdma(() -> RdmaDevice.open("soft", Map.of("maxSendSge", "two")), Errno.EINVAL, "not a number");
        assertRdma(() -> RdmaDevice.open("soft", Map.of("maxSendSge", "0")), Errno.EINVAL, "positive");
        assertRdma(() -> RdmaDevice.open("soft", Map.of("iWarp", "maybe")), Errno.EINVAL, "iWarp");
        java.util.HashMap<String, String> nullValue = new java.util.HashMap<>();
        nullValue.put("maxSendSge", null);
        assertRdma(() -> RdmaDevice.open("soft", nullValue), Errno.EINVAL, "null name or value");
        java.util.HashMap<String, String> nullKey = new java.util.HashMap<>();
        nullKey.put(null, "2");
        assertRdma(() -> RdmaDevice.open("soft", nullKey), Errno.EINVAL, "null name or value");
        assertRdma(() -> RdmaDevice.open(null, Map.of()), Errno.EINVAL, "provider name");
        assertRdma(() -> RdmaDevice.open("soft", null), Errno.EINVAL, "options map");
        assertRdma(() -> RdmaDevice.open(null), Errno.EINVAL);
        assertRdma(() -> RdmaDevice.open("soft", Map.of("maxMcastGroups", "0")), Errno.EINVAL, "maxMcastQpAttach");
        try (RdmaDevice shmLike = RdmaDevice.open("soft", Map.of("activeMtu", "1024", "maxMcastGroups", "0",
                "maxMcastQpAttach", "0"))) {
            assertThat(shmLike.attributes().activeMtu()).isEqualTo(1024);
            assertThat(shmLike.attributes().maxMcastGroups()).isZero();
        }
        assertRdma(() -> RdmaDevice.open("soft", Map.of("activeMtu", "1500")), Errno.EINVAL, "activeMtu");
    }

    @Test
    @org.junit.jupiter.api.Tag("soft-only")
    void aDeviceWithoutSignatureOffloadRefusesIntegrityMrsAndQpsAndChangesNothing() {
        try (RdmaDevice plain = RdmaDevice.open("soft", Map.of("integrityHandover", "false"))) {
            assertThat(plain.attributes().integrityHandover()).isFalse();
            ProtectionDomain pd = plain.allocPd();
            CompletionQueue cq = plain.createCq(8);
            CmId id = plain.createCmId();
            assertRdma(() -> pd.allocMrIntegrity(4, 1), Errno.EOPNOTSUPP, "allocMrIntegrity", "integrityHandover");
            assertRdma(() -> id.createQp(pd, QpInitAttributes.of(cq).maxRdmaCtxs(1).integrity(true)),
                    Errno.EOPNOTSUPP, "createQp", "integrityHandover");
            assertThat(plain.resources().survivors()).containsExactlyInAnyOrder(pd, cq, id);
            assertThat(pd.useCount()).isZero();
            assertThat(cq.useCount()).isZero();
            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq).maxRdmaCtxs(1));
            assertThat(qp.sigMrs().size()).isZero();
            id.destroyQp();
            id.close();
            cq.close();
            pd.close();
            assertThat(plain.resources().survivors()).isEmpty();
        }
        assertRdma(() -> RdmaDevice.open("soft", Map.of("integrityHandover", "perhaps")), Errno.EINVAL,
                "integrityHandover");
    }

    @Test
    void devicesHaveDistinctNamesTheUsersOwnOrTheProvidersWithAFreeNumber() {
        try (RdmaDevice a = Providers.open(); RdmaDevice b = Providers.open();
             RdmaDevice named = Providers.open(Map.of(RdmaDevice.NAME, "nic-0"))) {
            assertThat(java.util.List.of(device.name(), a.name(), b.name(), named.name())).doesNotHaveDuplicates();
            assertThat(a.name()).matches(Providers.NAME + "[0-9]+");
            assertThat(named.name()).isEqualTo("nic-0");
            assertThat(named.providerName()).isEqualTo(Providers.NAME);
            assertThat(named.toString()).contains("nic-0");
            assertThat(named.allocPd().toString()).startsWith("nic-0/ProtectionDomain#");
            named.forceClose();
            assertThat(RdmaDevice.openDevices()).contains(device, a, b).doesNotContain(named);
            assertRdma(() -> RdmaDevice.open(Providers.NAME, Map.of(RdmaDevice.NAME, a.name())), Errno.EEXIST, a.name());
            assertRdma(() -> RdmaDevice.open(Providers.NAME, Map.of(RdmaDevice.NAME, "no spaces")), Errno.EINVAL, "name");
            assertRdma(() -> RdmaDevice.open(Providers.NAME, Map.of(RdmaDevice.NAME, "")), Errno.EINVAL, "name");
            String freed = a.name();
            a.close();
            try (RdmaDevice again = Providers.open()) {
                assertThat(again.name()).as("the lowest free number is reused").isEqualTo(freed);
            }
        }
    }

    @Test
    void invariant1PdCountsItsChildrenAndRefusesToDieWhileTheyLive() {
        ProtectionDomain pd = device.allocPd();
        CompletionQueue cq = device.createCq(16);
        CmId id = device.createCmId();
        MemoryRegion a = pd.register(memory, Access.LOCAL_WRITE);
        MemoryRegion b = pd.allocMr(8);
        id.createQp(pd, QpInitAttributes.of(cq));
        assertThat(pd.useCount()).isEqualTo(3);

        assertRdma(pd::close, Errno.EBUSY, pd.toString(), "3 live");
        // still usable after the refusal
        MemoryRegion c = pd.register(memory.asSlice(0, 4096), Access.REMOTE_READ);
        assertThat(pd.useCount()).isEqualTo(4);

        c.close();
        a.close();
        b.close();
        id.destroyQp();
        assertThat(pd.useCount()).isZero();
        pd.close();
        assertRdma(pd::close, Errno.EBADF, "after it was destroyed");
        id.close();
        cq.close();
    }

    @Test
    void invariant2CqInUseCannotBeDestroyed() {
        ProtectionDomain pd = device.allocPd();
        CompletionQueue send = device.createCq(8);
        CompletionQueue recv = device.createCq(8);
        CmId id = device.createCmId();
        QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(send).recvCq(recv));
        assertThat(qp.sendCq()).isSameAs(send);
        assertThat(send.useCount()).isEqualTo(1);
        assertThat(recv.useCount()).isEqualTo(1);
        assertRdma(send::close, Errno.EBUSY, send.toString(), "destroy the QPs first");
        assertRdma(recv::close, Errno.EBUSY);
        id.destroyQp();
        send.close();
        recv.close();
        id.close();
        pd.close();
    }

    @Test
    void invariant3CmIdWithQpCannotBeDestroyedAndQpDiesOnce() {
        ProtectionDomain pd = device.allocPd();
        CompletionQueue cq = device.createCq(8);
        CmId id = device.createCmId();
        QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq));
        assertThat(id.qp()).isSameAs(qp);
        assertThat(qp.state()).isEqualTo(QueuePair.State.INIT);
        assertRdma(id::close, Errno.EBUSY, id.toString(), "destroyQp() first");
        assertThat(id.isDestroyed()).isFalse();
        assertRdma(() -> id.createQp(pd, QpInitAttributes.of(cq)), Errno.EBUSY, "one QP");

        id.destroyQp();
        assertThat(id.qp()).isNull();
        assertThat(qp.isDestroyed()).isTrue();
        assertThat(cq.useCount()).isZero();
        assertRdma(id::destroyQp, Errno.EINVAL, "no QP attached");
        id.close();
        cq.close();
        pd.close();
    }

    @Test
    void invariant4QpWithAnotherDevicesPdIsEinvalAndChangesNothing() {
        try (RdmaDevice other = Providers.open()) {
            ProtectionDomain foreignPd = other.allocPd();
            CompletionQueue foreignCq = other.createCq(8);
            ProtectionDomain pd = device.allocPd();
            CompletionQueue cq = device.createCq(8);
            CmId id = device.createCmId();
            // Messages tell the two devices apart: each object carries its device's own name.
            assertThat(other.name()).isNotEqualTo(device.name());
            assertRdma(() -> id.createQp(foreignPd, QpInitAttributes.of(cq)), Errno.EINVAL,
                    other.name() + "/ProtectionDomain#", "of device " + other.name(), "this ID is bound to " + device.name());
            assertRdma(() -> id.createQp(pd, QpInitAttributes.of(foreignCq)), Errno.EINVAL,
                    other.name() + "/CompletionQueue#", "belongs to device " + other.name());
            assertThat(foreignPd.useCount()).isZero();
            assertThat(pd.useCount()).isZero();
            assertThat(cq.useCount()).isZero();
            assertThat(id.qp()).isNull();
            id.close();
            cq.close();
            pd.close();
            foreignCq.close();
            foreignPd.close();
        }
    }

    @Test
    void qpLimitsAreCheckedAndRwContextsGrowTheSendQueue() {
        ProtectionDomain pd = device.allocPd();
        CompletionQueue cq = device.createCq(8);
        CmId id = device.createCmId();
        assertRdma(() -> id.createQp(pd, QpInitAttributes.of(cq).maxSendSge(31)), Errno.EINVAL, "maxSendSge 31");
        assertRdma(() -> id.createQp(pd, QpInitAttributes.of(cq).maxSendWr(0)), Errno.EINVAL, "maxSendWr 0");
        assertRdma(() -> id.createQp(pd, new QpInitAttributes().sendCq(cq)), Errno.EINVAL, "receive CQ");
        assertThat(pd.useCount()).isZero();
        // plain IB device: f = 1
        QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq).maxSendWr(100).maxRdmaCtxs(10).maxSendSge(4));
        assertThat(qp.maxSendWr()).isEqualTo(110);
        assertThat(qp.maxReadSge()).isEqualTo(4);
        id.destroyQp();
        id.close();
        cq.close();
        pd.close();

        try (RdmaDevice iwarp = Providers.open(Map.of("iWarp", "true", "maxQpWr", "1000", "maxSgeRd", "2"))) {
            ProtectionDomain pd2 = iwarp.allocPd();
            CompletionQueue cq2 = iwarp.createCq(8);
            CmId id2 = iwarp.createCmId();
            // MR-capable device: f = 3, clamped to maxQpWr
            QueuePair q2 = id2.createQp(pd2, QpInitAttributes.of(cq2).maxSendWr(100).maxRdmaCtxs(400).maxSendSge(4));
            assertThat(q2.maxSendWr()).isEqualTo(1000);
            assertThat(q2.maxReadSge()).isEqualTo(2);
            id2.destroyQp();
            id2.close();
            cq2.close();
            pd2.close();
        }
    }

    @Test
    void invariant17DeviceCloseListsSurvivorsAndForceCloseTearsDownInOrder() {
        ProtectionDomain pd = device.allocPd();
        CompletionQueue cq = device.createCq(8);
        CmId id = device.createCmId();
        id.createQp(pd, QpInitAttributes.of(cq));
        pd.register(memory, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        assertThat(device.resources().count()).isEqualTo(5);

        assertRdma(device::close, Errno.EBUSY, "5 live object(s)", "ProtectionDomain#", "CompletionQueue#", "CmId#",
                "QueuePair#", "MemoryRegion#", "owned by ObjectModelTest",
                "ObjectModelTest.invariant17DeviceCloseListsSurvivorsAndForceCloseTearsDownInOrder(ObjectModelTest.java:");
        assertThat(device.isClosed()).isFalse();
        device.allocPd().close(); // still usable

        String report = device.forceClose();
        assertThat(report).contains("5 live object(s)");
        assertThat(device.resources().survivors()).isEmpty();
        assertThat(pd.isDestroyed()).isTrue();
        assertRdma(device::allocPd, Errno.EBADF, "after close");
        device = Providers.open(); // for the common teardown
    }

    @Test
    void destroyedObjectsRefuseUse() {
        ProtectionDomain pd = device.allocPd();
        CompletionQueue cq = device.createCq(4);
        CmId id = device.createCmId();
        cq.close();
        assertRdma(() -> id.createQp(pd, QpInitAttributes.of(cq)), Errno.EBADF, cq.toString());
        pd.close();
        assertRdma(() -> pd.register(memory, Access.LOCAL_WRITE), Errno.EBADF, pd.toString());
        assertRdma(pd::localDmaLkey, Errno.EBADF);
        assertRdma(() -> pd.allocMr(1), Errno.EBADF);
        id.close();
        assertRdma(id::destroyQp, Errno.EBADF);
        assertRdma(() -> device.createCq(0), Errno.EINVAL, "createCq(0)");
    }
}
