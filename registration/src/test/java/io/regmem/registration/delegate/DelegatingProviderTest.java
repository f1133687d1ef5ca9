package io.regmem.registration.delegate;

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
import io.regmem.registration.faults.QpFaults;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The test-only provider is really in the path: a device opened as {@code delegate} forwards to soft
 * through the provider interface, with keys of its own format, so a raw soft rkey in a work request
 * fails and only the exported-and-imported key works. (The contract suites run on it in the build's
 * {@code contract-on-delegate} execution.)
 */
@ExtendWith(NoLeaks.class)
class DelegatingProviderTest {

    @Test
    void aConnectedPairOfDelegateDevicesMovesBytesOnlyByImportedKeys() {
        long before = DelegatingProvider.FORWARDED.get();
        try (Arena arena = Arena.ofShared();
             RdmaDevice a = RdmaDevice.open("delegate");
             RdmaDevice b = RdmaDevice.open("delegate")) {
            assertThat(a.providerName()).isEqualTo("delegate");
            assertThat(a.name()).startsWith("delegate");
            ProtectionDomain pdA = a.allocPd();
            ProtectionDomain pdB = b.allocPd();
            CompletionQueue cqA = a.createCq(16);
            CompletionQueue cqB = b.createCq(16);
            CmId listener = b.createCmId();
            listener.listen("delegate-test");
            CmId idA = a.createCmId();
            QueuePair qpA = idA.createQp(pdA, QpInitAttributes.of(cqA));
            idA.connect("delegate-test");
            CmId idB = listener.getRequest();
            QueuePair qpB = idB.createQp(pdB, QpInitAttributes.of(cqB));
            idB.accept();
            assertThat(qpA.state()).isEqualTo(QueuePair.State.RTS);

            MemorySegment src = arena.allocate(4096);
            MemorySegment dst = arena.allocate(4096);
            src.set(ValueLayout.JAVA_LONG, 0, 42);
            MemoryRegion local = pdA.register(src, Access.LOCAL_WRITE);
            MemoryRegion remote = pdB.register(dst, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            byte[] exported = remote.exportRemoteKey();
            assertThat(exported).hasSize(8); // "DLG1" and the soft key
            int handle = qpA.importRemoteKey(exported);
            assertThat(handle).isNotEqualTo(remote.rkey());

            WorkCompletion[] wcs = {new WorkCompletion()};
            WorkRequest wr = new WorkRequest(1).opcode(Opcode.RDMA_WRITE).addSge(src.address(), 8, local.lkey())
                    .remote(dst.address(), handle);
            qpA.postSend(wr);
            assertThat(cqA.poll(wcs)).isEqualTo(1);
            assertThat(wcs[0].status()).isEqualTo(WcStatus.SUCCESS);
            assertThat(dst.get(ValueLayout.JAVA_LONG, 0)).isEqualTo(42);

            // the raw soft key means nothing to this provider's peer
            wr.reset().opcode(Opcode.RDMA_WRITE).addSge(src.address(), 8, local.lkey()).remote(dst.address(), remote.rkey());
            qpA.postSend(wr);
            assertThat(cqA.poll(wcs)).isEqualTo(1);
            assertThat(wcs[0].status()).isEqualTo(WcStatus.REM_ACCESS_ERR);
            assertThat(qpA.unwrap(DelegatingProviderTest.class)).isNull();
            assertThat(qpA.unwrap(QpFaults.class)).as("capabilities pass through the wrapper").isNotNull();

            idA.disconnect();
            idA.destroyQp();
            idB.destroyQp();
            idA.close();
            idB.close();
            listener.close();
            local.close();
            remote.close();
            cqA.close();
            cqB.close();
            pdA.close();
            pdB.close();
        }
        assertThat(DelegatingProvider.FORWARDED.get()).as("calls that went through the delegate").isGreaterThan(before + 6);
    }
}
