package io.regmem.examples;

// example: rw
import io.regmem.core.ScatterList;
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.DmaMapping;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.rw.RwContext;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Three scattered local pages written to the peer's memory in one RDMA WRITE chain, then read back. */
public final class RwExample {
    public static void main(String[] args) {
        try (Arena arena = Arena.ofShared();
             RdmaDevice local = RdmaDevice.open("soft");
             RdmaDevice remote = RdmaDevice.open("soft")) {
            MemorySegment pages = arena.allocate(8 * 4096, 4096);     // the local side's I/O memory
            MemorySegment sink = arena.allocate(3 * 4096, 4096);      // the peer's registered memory
            for (int p = 0; p < 3; p++) {
                pages.asSlice(2L * p * 4096, 4096).fill((byte) ('a' + p));
            }

            ProtectionDomain pd = local.allocPd();
            CompletionQueue cq = local.createCq(64);
            ProtectionDomain peerPd = remote.allocPd();
            CompletionQueue peerCq = remote.createCq(64);
            MemoryRegion sinkMr = peerPd.register(sink, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
            CmId listener = remote.createCmId();
            listener.listen("rw-example");
            CmId id = local.createCmId();
            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq).maxSendSge(4).maxRdmaCtxs(4));
            id.connect("rw-example");
            CmId peer = listener.getRequest();
            peer.createQp(peerPd, QpInitAttributes.of(peerCq));
            peer.accept();
            int rkey = qp.importRemoteKey(sinkMr.exportRemoteKey());

            // The local pages are DMA-mapped (reachable with the PD's local DMA key), not registered.
            DmaMapping mapping = local.dmaMap(pages);
            ScatterList sg = new ScatterList();
            for (int p = 0; p < 3; p++) {
                sg.add(pages.address() + 2L * p * 4096, 4096);        // every other page: not contiguous
            }
            RwContext ctx = new RwContext();                          // reusable; allocation-free once grown
            int wqes = ctx.init(qp, 1, sg, sg.count(), 0, sink.address(), rkey, DmaDirection.TO_DEVICE);
            ctx.post(qp, 1, 100);                                     // one signaled WR ends the chain
            WorkCompletion wc = await(cq);
            ctx.destroy(qp, 1, sg, sg.count(), DmaDirection.TO_DEVICE); // the same list, count and direction
            System.out.println("WRITE: " + wqes + " work request(s), " + wc.status());
            System.out.println("peer memory: " + (char) sink.get(ValueLayout.JAVA_BYTE, 0)
                    + (char) sink.get(ValueLayout.JAVA_BYTE, 4096) + (char) sink.get(ValueLayout.JAVA_BYTE, 8192));

            pages.fill((byte) 0);
            ctx.init(qp, 1, sg, sg.count(), 0, sink.address(), rkey, DmaDirection.FROM_DEVICE);  // RDMA READ
            ctx.post(qp, 1, 101);
            System.out.println("READ: " + await(cq).status() + ", first byte of page 3: "
                    + (char) pages.get(ValueLayout.JAVA_BYTE, 4 * 4096));
            ctx.destroy(qp, 1, sg, sg.count(), DmaDirection.FROM_DEVICE);

            id.disconnect();
            id.destroyQp();
            peer.destroyQp();
            id.close();
            peer.close();
            listener.close();
            mapping.close();
            sinkMr.close();
            cq.close();
            peerCq.close();
            pd.close();
            peerPd.close();
        }
    }

    private static WorkCompletion await(CompletionQueue cq) {
        WorkCompletion[] wcs = {new WorkCompletion()};
        while (cq.poll(wcs) == 0) {
            Thread.onSpinWait();
        }
        return wcs[0];
    }
}
// end example
