package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The UCX device through the public verbs API (the provider is listed for the tests only until its
 * data path exists): memory registers with {@code ucp_mem_map}, the exported key is the envelope
 * around the packed key and names the region, kinds UCX cannot carry are refused with EOPNOTSUPP,
 * and closing leaves nothing behind.
 */
@ExtendWith(NoLeaks.class)
class UcxRegistrationTest {

    @Test
    void aRegionExportsAnEnvelopeNamingItAndUcxsPackedKey() {
        UcxAvailable.require();
        try (Arena arena = Arena.ofShared()) {
            MemorySegment mem = arena.allocate(1 << 20, 4096);
            RdmaDevice dev = RdmaDevice.open("ucx");
            ProtectionDomain pd = dev.allocPd();
            MemoryRegion mr = pd.register(mem, Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE);
            byte[] exported = mr.exportRemoteKey();
            assertThat(exported.length).isEqualTo(mr.exportedKeySize()).isGreaterThan(RemoteKeyEnvelope.HEADER);
            RemoteKeyEnvelope.Decoded d = RemoteKeyEnvelope.decode(MemorySegment.ofArray(exported), "test");
            assertThat(d.rkey()).isEqualTo(mr.rkey());
            assertThat(d.address()).isEqualTo(mem.address());
            assertThat(d.length()).isEqualTo(1 << 20);
            assertThat(d.access()).isEqualTo(mr.access());
            mr.close();
            pd.close();
            dev.close();
        }
    }

    @Test
    void aFastRegMrHasNoUcxRegistrationAndExportsAKeyTheTargetChecks() {
        UcxAvailable.require();
        RdmaDevice dev = RdmaDevice.open("ucx");
        ProtectionDomain pd = dev.allocPd();
        MemoryRegion mr = pd.allocMr(16);
        byte[] exported = mr.exportRemoteKey();
        assertThat(exported).as("no ucp_mem_map behind it, no range (its mapping changes with every REG_MR): "
                + "the key alone").hasSize(4);
        assertThat(MemorySegment.ofArray(exported).get(UcxKeyTable.BE_INT, 0)).as("big-endian, as soft's").isEqualTo(mr.rkey());
        mr.close();
        pd.close();
        dev.close();
    }

    @Test
    void integrityMrsAreRefusedWithEopnotsuppAndNothingIsLeft() {
        UcxAvailable.require();
        RdmaDevice dev = RdmaDevice.open("ucx");
        ProtectionDomain pd = dev.allocPd();
        assertThatThrownBy(() -> pd.allocMrIntegrity(4, 1)).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EOPNOTSUPP))
                .hasMessageContaining("integrity");
        pd.close(); // nothing of the refused MR holds the PD
        dev.close();
    }

    @Test
    void anUnknownOptionIsEinvalAndOpensNothing() {
        UcxAvailable.require();
        assertThatThrownBy(() -> RdmaDevice.open("ucx", Map.of("noSuchOption", "1"))).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(Errno.EINVAL))
                .hasMessageContaining("noSuchOption");
        assertThat(RdmaDevice.openDevices()).isEmpty();
    }

    @Test
    void manyDevicesOpenAndCloseCleanly() {
        UcxAvailable.require();
        try (Arena arena = Arena.ofShared()) {
            MemorySegment mem = arena.allocate(64 * 1024, 4096);
            for (int i = 0; i < 20; i++) {
                RdmaDevice dev = RdmaDevice.open("ucx");
                ProtectionDomain pd = dev.allocPd();
                MemoryRegion mr = pd.register(mem.asSlice(i * 1024L, 4096), Access.LOCAL_WRITE);
                assertThat(mr.exportRemoteKey()).isNotEmpty();
                mr.close();
                pd.close();
                dev.close();
            }
        }
    }
}
