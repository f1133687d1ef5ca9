package io.regmem.registration.fuzz;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.testkit.Providers;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The stateful API fuzz against its model ({@link ModelFuzz}), and its concurrent variant
 * ({@link ConcurrentFuzz}). CI runs about 10,000 operations; {@code -Psoak} 1,000,000
 * ({@code -Dregmem.fuzz.ops}); every run prints its seed ({@code -Dregmem.fuzz.seed} replays it).
 */
@ExtendWith(NoLeaks.class)
class ApiFuzzTest {

    @Test
    void randomOperationsAgreeWithTheModel() {
        long seed = FuzzBudget.seed();
        int ops = FuzzBudget.ops(10_000);
        System.out.println("ApiFuzzTest: " + ops + " operations on " + FuzzBudget.provider() + ", seed " + seed
                + " (replay: -Dregmem.fuzz.seed=" + seed + ")");
        java.util.Map<String, Integer> counts;
        java.util.Map<String, Integer> outcomes;
        int connections;
        try (ModelFuzz fuzz = new ModelFuzz(seed, FuzzBudget.provider())) {
            fuzz.run(ops);
            counts = fuzz.counts();
            outcomes = fuzz.outcomes();
            connections = fuzz.connections();
        }
        if (Boolean.getBoolean("regmem.fuzz.verbose")) { // what ran and how it ended: for soak runs, not every build
            System.out.println("ApiFuzzTest: " + counts + ", " + connections + " connections; outcomes " + outcomes);
        }
        assertThat(counts.keySet()).as("every kind of operation ran").contains("register", "deregister", "cache.get",
                "cache", "pool.allocate", "pool", "RDMA_WRITE", "RDMA_READ", "RDMA_WRITE_WITH_IMM", "SEND", "recv",
                "bad", "close", "free", "reconnect", "allocMw", "bind", "BIND_MW", "LOCAL_INV", "SEND_WITH_INV", "srq.postRecv");
        assertThat(outcomes).as("requests succeeded and failed in many ways").containsKeys("RDMA_WRITE SUCCESS",
                "RDMA_READ SUCCESS", "SEND SUCCESS", "RDMA_WRITE LOC_PROT_ERR", "RDMA_WRITE REM_ACCESS_ERR",
                "RDMA_READ LOC_PROT_ERR", "SEND REM_OP_ERR", "SEND RNR_RETRY_EXC_ERR", "SEND_WITH_IMM SUCCESS",
                "ATOMIC_FETCH_AND_ADD SUCCESS", "ATOMIC_CMP_AND_SWP SUCCESS", "BIND_MW SUCCESS", "BIND_MW MW_BIND_ERR",
                "LOCAL_INV LOC_PROT_ERR", "SEND into an SRQ receive SUCCESS");
    }

    /**
     * Unreliable datagrams against their model ({@link UdModelFuzz}): deliveries byte-checked, every
     * drop counted where the model says. CI runs 3,000 operations.
     */
    @Test
    void randomDatagramOperationsAgreeWithTheModel() throws Exception {
        try (RdmaDevice probe = Providers.open()) {
            Assumptions.assumeTrue(probe.supportsDatagrams(), Providers.NAME + " carries no datagrams");
        }
        long seed = FuzzBudget.seed();
        int ops = FuzzBudget.ops(10_000) * 3 / 10;
        System.out.println("ApiFuzzTest (datagrams): " + ops + " operations on " + FuzzBudget.provider() + ", seed " + seed);
        java.util.Map<String, Integer> counts;
        try (UdModelFuzz fuzz = new UdModelFuzz(seed)) {
            fuzz.run(ops);
            counts = fuzz.counts();
        }
        assertThat(counts.keySet()).as("every kind of operation and outcome").contains("recv", "unicast", "multicast",
                "attach", "detach", "bad", "recreate", "over-MTU", "delivered", "drop.QKEY", "drop.NO_RECEIVE",
                "drop.TOO_SMALL");
    }

    /**
     * Two posters and a poller on one QP while target regions are deregistered: every write
     * completes once, a failed one moved no byte, nothing changes after a deregistration returned.
     * CI runs 40 rounds; the soak profile 4,000 (scaled with {@code -Dregmem.fuzz.ops}).
     */
    @Test
    void postersPollerAndDeregistrationsRacing() throws InterruptedException {
        long seed = FuzzBudget.seed();
        int rounds = Math.max(40, FuzzBudget.ops(10_000) / 250);
        System.out.println("ApiFuzzTest (concurrent): " + rounds + " rounds on " + FuzzBudget.provider() + ", seed " + seed);
        int raced;
        try (ConcurrentFuzz fuzz = new ConcurrentFuzz(seed, FuzzBudget.provider())) {
            fuzz.run(rounds);
            raced = fuzz.racedDeregistrations();
        }
        assertThat(raced).as("deregistrations that raced with posting").isPositive();
    }
}
