package io.regmem.examples;

// example: ucx
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
import java.util.Map;

/**
 * The same RDMA WRITE over UCX: two UCX devices (contexts and workers) connected over TCP on the
 * loopback; in two processes or on two hosts, the server listens and the client connects the same way.
 */
public final class UcxExample {
    public static void main(String[] args) {
        try (Arena arena = Arena.ofShared();
             RdmaDevice client = RdmaDevice.open("ucx", Map.of("progressThread", "true"));
             RdmaDevice server = RdmaDevice.open("ucx", Map.of("progressThread", "true"))) {
            MemorySegment source = arena.allocate(4096, 4096);
            MemorySegment target = arena.allocate(4096, 4096);
            source.setString(0, "hello, registered memory");

            // The server registers its memory for remote writes and listens.
            ProtectionDomain serverPd = server.allocPd();
            CompletionQueue serverCq = server.createCq(256);            // room for all its QP's slots: 128 + 128
            MemoryRegion targetMr = serverPd.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            CmId listener = server.createCmId();
            listener.bindAddr("127.0.0.1:" + (args.length > 0 ? args[0] : "0")); // ucx: host:port; 0: the system picks
            listener.listen();                                     // a UCX listener there
            String address = listener.localAddress();              // with the port picked

            // The client registers its source and connects.
            ProtectionDomain clientPd = client.allocPd();
            CompletionQueue clientCq = client.createCq(256);
            MemoryRegion sourceMr = clientPd.register(source, Access.LOCAL_WRITE);
            CmId active = client.createCmId();
            QueuePair qp = active.createQp(clientPd, QpInitAttributes.of(clientCq));
            active.connect(address);
            CmId passive;
            while ((passive = listener.getRequest()) == null) {
                Thread.onSpinWait();                               // the request arrives asynchronously
            }
            passive.createQp(serverPd, QpInitAttributes.of(serverCq));
            passive.accept();                                      // both queue pairs are ready to send

            // The server's key travels to the client once per registration (as bytes, in a message).
            byte[] exported = targetMr.exportRemoteKey();
            int rkey = qp.importRemoteKey(exported);
            WorkRequest write = new WorkRequest(1)                 // reusable: posting copies it
                    .wrId(1).opcode(Opcode.RDMA_WRITE).signaled(true)
                    .addSge(source.address(), 64, sourceMr.lkey())
                    .remote(target.address(), rkey);
            qp.postSend(write);
            WorkCompletion[] wcs = {new WorkCompletion()};         // reusable: poll fills it
            while (clientCq.poll(wcs) == 0) {
                Thread.onSpinWait();                               // the progress threads complete it
            }
            System.out.println("completion: " + wcs[0].status() + ", " + wcs[0].byteLen() + " bytes");
            System.out.println("server reads: " + target.getString(0));
            if (wcs[0].status() != WcStatus.SUCCESS) {
                throw new IllegalStateException("the write failed: " + wcs[0].status());
            }

            // Teardown in the verbs order: disconnect, destroy QPs, IDs, MRs, CQs, PDs.
            active.disconnect();
            active.destroyQp();
            passive.destroyQp();
            active.close();
            passive.close();
            listener.close();
            sourceMr.close();
            targetMr.close();
            clientCq.close();
            serverCq.close();
            clientPd.close();
            serverPd.close();
        }
    }
}
// end example
