package io.regmem.registration.testkit;

import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * The fixture of the connection-setup tests: two devices of the provider under test, a PD and a CQ
 * (depth 64) on each, opened before every test; after it, every CM ID still alive on either (and its
 * QP) is destroyed, then the CQs, PDs and devices, in the verbs order.
 */
public abstract class TwoDevices {
    protected RdmaDevice devA;
    protected RdmaDevice devB;
    protected ProtectionDomain pdA;
    protected ProtectionDomain pdB;
    protected CompletionQueue cqA;
    protected CompletionQueue cqB;

    @BeforeEach
    void openTwoDevices() {
        devA = Providers.open();
        devB = Providers.open();
        pdA = devA.allocPd();
        pdB = devB.allocPd();
        cqA = devA.createCq(64);
        cqB = devB.createCq(64);
    }

    @AfterEach
    void closeTwoDevices() {
        for (RdmaDevice d : new RdmaDevice[] {devA, devB}) {
            for (CmId id : d.resources().survivors(CmId.class)) {
                if (id.isDestroyed()) {
                    continue; // a pending request its listener's close refused
                }
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
        }
        cqA.close();
        cqB.close();
        pdA.close();
        pdB.close();
        devA.close();
        devB.close();
    }
}
