package io.regmem.registration.shm;

import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryUsage;
import java.util.concurrent.TimeUnit;

/**
 * The connecting process of {@code ShmProcessTest}'s thousand connections, in a JVM of its own with a
 * fixed heap and Native Memory Tracking, so that its figures say whether memory grows on the heap
 * (collectable garbage) or natively: it connects to the address in its first argument and ends the
 * connection {@code warm-up} times, prints {@code REGMEM STATS} (after a full GC) and waits for a
 * line on its input; then {@code cycles} times more, prints {@code REGMEM STATS} again and ends with
 * {@code REGMEM CLEAN} when its device was left with nothing. Arguments: address, warm-up, cycles.
 */
public final class ShmConnector {
    private ShmConnector() {
    }

    public static void main(String[] args) throws Exception {
        String address = args[0];
        int warmUp = Integer.parseInt(args[1]);
        int cycles = Integer.parseInt(args[2]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        try (RdmaDevice dev = RdmaDevice.open("shm")) {
            ProtectionDomain pd = dev.allocPd();
            CompletionQueue cq = dev.createCq(64);
            WorkCompletion[] wcs = {new WorkCompletion(), new WorkCompletion()};
            for (int i = 0; i < warmUp + cycles; i++) {
                if (i == warmUp) {
                    stats();
                    in.readLine(); // the listener's figures are taken meanwhile
                }
                CmId id = dev.createCmId();
                QueuePair qp = id.createQp(pd, new QpInitAttributes().sendCq(cq).recvCq(cq).maxSendWr(4).maxRecvWr(1));
                id.connect(address);
                id.awaitConnected(20, TimeUnit.SECONDS);
                id.disconnect();
                while (qp.outstandingSends() + qp.outstandingRecvs() > 0) {
                    cq.poll(wcs);
                }
                id.destroyQp();
                id.close();
            }
            stats();
            cq.close();
            pd.close();
            System.out.println(dev.resources().survivors().isEmpty() ? "REGMEM CLEAN" : "REGMEM LEFT " + dev.resources().report());
            System.out.flush();
        }
    }

    /** This process's figures after a full GC, with the heap in use. */
    private static void stats() throws Exception {
        System.gc();
        MemoryUsage heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage();
        System.out.println("REGMEM STATS " + ShmPeerMain.stats() + " heapUsedKiB=" + heap.getUsed() / 1024);
        System.out.flush();
    }
}
