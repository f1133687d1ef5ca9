package io.regmem.examples;

// example: two-process
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.MemoryRegion;
import io.regmem.registration.Opcode;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A server process and a client process: {@code server HOST:PORT} listens and, when a client asks,
 * accepts with its buffer's address and remote key in the accept's private data (as rdma_cm
 * programs do); {@code client HOST:PORT} connects, takes them from its ID's private data, and RDMA
 * WRITEs a greeting with immediate data, which completes a receive at the server. A third argument
 * names the provider: {@code ucx} (the default: between hosts too) or {@code shm} (one host).
 */
public final class TwoProcessExample {
    public static void main(String[] args) throws Exception {
        String provider = args.length == 3 ? args[2] : "ucx";
        if (args.length >= 2 && args[0].equals("server")) {
            server(args[1], provider);
        } else if (args.length >= 2 && args[0].equals("client")) {
            client(args[1], provider);
        } else {
            System.err.println("usage: TwoProcessExample server|client HOST:PORT [ucx|shm]");
        }
    }

    static void server(String address, String provider) {
        RdmaDevice device = RdmaDevice.open(provider, Map.of("progressThread", "true"));
        try (Arena arena = Arena.ofShared()) {
            MemorySegment target = arena.allocate(4096, 4096);
            ProtectionDomain pd = device.allocPd();
            CompletionQueue cq = device.createCq(256);
            MemoryRegion mr = pd.register(target, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            CmId listener = device.createCmId();
            listener.listen(address);
            System.out.println("listening on " + address);
            CmId id;
            while ((id = listener.getRequest()) == null) {
                Thread.onSpinWait();                                     // a client's request arrives
            }
            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq));
            qp.postRecv(new WorkRequest(1).wrId(1));                       // no SGE: for the WRITE's immediate data
            byte[] key = mr.exportRemoteKey();
            id.accept(ByteBuffer.allocate(10 + key.length)                  // where and how to write:
                    .putLong(target.address()).putShort((short) key.length).put(key).array());
            WorkCompletion[] wcs = {new WorkCompletion()};
            while (cq.poll(wcs) == 0) {
                Thread.onSpinWait();
            }
            System.out.println("server: " + wcs[0].status() + " " + wcs[0].opcode() + ", imm " + wcs[0].immData()
                    + ": " + target.getString(0));
            id.disconnect();
        } finally {
            device.forceClose();                                           // everything, in the verbs order
        }
    }

    static void client(String address, String provider) {
        RdmaDevice device = RdmaDevice.open(provider, Map.of("progressThread", "true"));
        try (Arena arena = Arena.ofShared()) {
            MemorySegment source = arena.allocate(4096, 4096);
            source.setString(0, "hello from process " + ProcessHandle.current().pid());
            ProtectionDomain pd = device.allocPd();
            CompletionQueue cq = device.createCq(256);
            MemoryRegion mr = pd.register(source, Access.LOCAL_WRITE);
            CmId id = device.createCmId();
            QueuePair qp = id.createQp(pd, QpInitAttributes.of(cq));
            id.connect(address);
            id.awaitConnected(10, TimeUnit.SECONDS);                      // CONNECTED, or an exception saying why
            ByteBuffer accepted = ByteBuffer.wrap(id.privateData());       // what the server's accept carried
            long remoteAddress = accepted.getLong();
            byte[] key = new byte[accepted.getShort()];
            accepted.get(key);
            qp.postSend(new WorkRequest(1).wrId(1).opcode(Opcode.RDMA_WRITE_WITH_IMM).immData(42).signaled(true)
                    .addSge(source.address(), 64, mr.lkey()).remote(remoteAddress, qp.importRemoteKey(key)));
            WorkCompletion[] wcs = {new WorkCompletion()};
            while (cq.poll(wcs) == 0) {
                Thread.onSpinWait();
            }
            System.out.println("client: " + wcs[0].status());
            id.disconnect();
        } finally {
            device.forceClose();
        }
    }
}
// end example
