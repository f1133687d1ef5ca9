package io.regmem.examples;

// example: rpc
import io.regmem.core.BufferPool;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionQueue;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.rpc.Rep;
import io.regmem.registration.rpc.Req;
import io.regmem.registration.rpc.RpcBuffer;
import io.regmem.registration.rpc.RpcTransport;
import io.regmem.registration.rpc.SendLock;
import java.lang.foreign.ValueLayout;

/**
 * Calls and replies with pooled, registered request buffers: the client sends a number, the server
 * answers with its square. A request goes back to the pool only when the transport is done with it
 * (its reply handled and its Send completed), which the transport says through {@code completed}.
 */
public final class RpcExample {
    static final int CALLS = 1000;

    public static void main(String[] args) {
        try (RdmaDevice clientDev = RdmaDevice.open("soft");
             RdmaDevice serverDev = RdmaDevice.open("soft");
             BufferPool pool = BufferPool.builder().name("rpc-example").build()) {
            ProtectionDomain clientPd = clientDev.allocPd();
            ProtectionDomain serverPd = serverDev.allocPd();
            CompletionQueue clientCq = clientDev.createCq(256);
            CompletionQueue serverCq = serverDev.createCq(256);
            CmId listener = serverDev.createCmId();
            listener.listen("rpc-example");
            CmId clientId = clientDev.createCmId();
            QueuePair clientQp = clientId.createQp(clientPd, QpInitAttributes.of(clientCq).maxSendWr(64).maxRecvWr(32));
            clientId.connect("rpc-example");
            CmId serverId = listener.getRequest();
            QueuePair serverQp = serverId.createQp(serverPd, QpInitAttributes.of(serverCq).maxSendWr(64).maxRecvWr(32));
            serverId.accept();

            // Each side: preallocated requests with registered header/send/receive buffers.
            RpcBuffer clientBufs = RpcBuffer.builder(clientPd, pool).maxRequests(16).inline(256, 256).build();
            RpcBuffer serverBufs = RpcBuffer.builder(serverPd, pool).maxRequests(16).inline(256, 256).build();
            SendLock clientLock = new SendLock();
            SendLock serverLock = new SendLock();
            Req[] waiting = new Req[16];          // the client's calls in flight, by request id
            long[] sum = new long[1];
            int[] answered = new int[1];

            RpcTransport[] server = new RpcTransport[1];
            server[0] = new RpcTransport(serverQp, serverCq, serverBufs, serverLock, new RpcTransport.Handler() {
                @Override
                public void received(Rep call, long bytes) {          // a call arrived
                    long x = call.buffer().segment().get(ValueLayout.JAVA_LONG, 0);
                    int id = call.buffer().segment().get(ValueLayout.JAVA_INT, 8);
                    serverBufs.repPut(call);                          // the receive buffer goes back
                    Req reply = serverBufs.get();                     // sized so one is always free here
                    reply.header().segment().set(ValueLayout.JAVA_LONG, 0, x * x);
                    reply.header().segment().set(ValueLayout.JAVA_INT, 8, id);
                    serverLock.lock();
                    try {
                        server[0].send(reply, 12, 0, false);          // no reply expected to a reply
                    } finally {
                        serverLock.unlock();
                    }
                    server[0].postRecvs(16);
                }

                @Override
                public void completed(Req reply) {                    // its Send completed: reusable
                    serverBufs.put(reply);
                }
            }, 8, 4);

            RpcTransport[] client = new RpcTransport[1];
            client[0] = new RpcTransport(clientQp, clientCq, clientBufs, clientLock, new RpcTransport.Handler() {
                @Override
                public void received(Rep rep, long bytes) {           // a reply arrived
                    sum[0] += rep.buffer().segment().get(ValueLayout.JAVA_LONG, 0);
                    Req call = waiting[rep.buffer().segment().get(ValueLayout.JAVA_INT, 8)];
                    call.attachReply(rep);
                    client[0].replyDone(call);                        // completed(call) follows once its Send is done too
                }

                @Override
                public void completed(Req call) {
                    answered[0]++;
                    clientBufs.put(call);                             // also gives its reply buffer back
                }
            }, 8, 4);
            server[0].postRecvs(16);

            int sent = 0;
            while (answered[0] < CALLS) {
                Req call = sent < CALLS ? clientBufs.get() : null;    // null: all 16 are in flight
                if (call != null) {
                    call.header().segment().set(ValueLayout.JAVA_LONG, 0, sent);
                    call.header().segment().set(ValueLayout.JAVA_INT, 8, call.id());
                    waiting[call.id()] = call;
                    client[0].postRecvs(16);                          // a receive for every call that may be out
                    clientLock.lock();
                    try {
                        if (client[0].send(call, 12, 0, true)) {
                            sent++;
                        } else {
                            clientBufs.put(call);                     // no send slot now: try again later
                        }
                    } finally {
                        clientLock.unlock();
                    }
                }
                server[0].poll();                                     // runs the server's handler
                client[0].poll();                                     // runs the client's handler
            }
            System.out.println(answered[0] + " calls answered, sum of squares " + sum[0]);

            client[0].flushDisconnect();                              // drain, unmap, nothing left posted
            server[0].flushDisconnect();
            System.out.println("requests still out: " + clientBufs.destroy().size() + " + " + serverBufs.destroy().size());
            clientId.disconnect();
            clientId.destroyQp();
            serverId.destroyQp();
            clientId.close();
            serverId.close();
            listener.close();
            clientCq.close();
            serverCq.close();
            clientPd.close();
            serverPd.close();
        }
    }
}
// end example
