package io.regmem.examples;

// example: sleeping-server
import io.regmem.registration.Access;
import io.regmem.registration.CmId;
import io.regmem.registration.CompletionChannel;
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
import java.util.concurrent.TimeUnit;

/** A server thread that sleeps on a completion channel until a message arrives, handles it, and sleeps again. */
public final class SleepingServerExample {
    public static void main(String[] args) throws Exception {
        try (Arena arena = Arena.ofShared();
             RdmaDevice client = RdmaDevice.open("soft");
             RdmaDevice server = RdmaDevice.open("soft")) {
            MemorySegment inbox = arena.allocate(4096, 4096);
            MemorySegment outbox = arena.allocate(4096, 4096);
            ProtectionDomain serverPd = server.allocPd();
            CompletionChannel channel = server.createCompletionChannel();
            CompletionQueue serverCq = server.createCq(256, channel);  // its completions raise events
            MemoryRegion inboxMr = serverPd.register(inbox, Access.LOCAL_WRITE);
            CmId listener = server.createCmId();
            listener.listen("sleeping-server");
            ProtectionDomain clientPd = client.allocPd();
            CompletionQueue clientCq = client.createCq(256);
            MemoryRegion outboxMr = clientPd.register(outbox, Access.LOCAL_WRITE);
            CmId active = client.createCmId();
            QueuePair qp = active.createQp(clientPd, QpInitAttributes.of(clientCq));
            active.connect("sleeping-server");
            CmId passive = listener.getRequest();
            QueuePair serverQp = passive.createQp(serverPd, QpInitAttributes.of(serverCq));
            passive.accept();
            active.awaitConnected(10, TimeUnit.SECONDS);

            int messages = 3;
            for (int i = 0; i < messages; i++) {                        // a receive per message slot
                serverQp.postRecv(new WorkRequest(1).wrId(i).addSge(inbox.address() + 64L * i, 64, inboxMr.lkey()));
            }
            Thread serverThread = Thread.ofPlatform().start(() -> {
                WorkCompletion[] wcs = {new WorkCompletion()};
                int handled = 0;
                while (handled < messages) {
                    serverCq.requestNotify(false);                      // arm, then poll: nothing is missed
                    if (serverCq.poll(wcs) == 0) {
                        CompletionQueue woke = channel.getEvent(1, TimeUnit.SECONDS); // sleeps until work arrives
                        if (woke != null) {
                            woke.ackEvents(1);
                        }
                        continue;
                    }
                    long slot = wcs[0].wrId();
                    System.out.println("server woke for: " + inbox.getString(64 * slot));
                    handled++;
                }
            });

            WorkCompletion[] done = {new WorkCompletion()};
            for (int i = 0; i < messages; i++) {
                Thread.sleep(50);                                       // the server is asleep by now
                outbox.setString(64L * i, "message " + (i + 1));
                qp.postSend(new WorkRequest(1).wrId(i).opcode(Opcode.SEND).signaled(true)
                        .addSge(outbox.address() + 64L * i, 16, outboxMr.lkey()));
                while (clientCq.poll(done) == 0) {
                    Thread.onSpinWait();                                // soft: this poll delivers the SEND
                }
                if (done[0].status() != WcStatus.SUCCESS) {
                    throw new IllegalStateException("the send failed: " + done[0].status());
                }
            }
            serverThread.join();

            active.disconnect();
            active.destroyQp();
            passive.destroyQp();
            active.close();
            passive.close();
            listener.close();
            inboxMr.close();
            outboxMr.close();
            clientCq.close();
            serverCq.close();
            channel.close();
            clientPd.close();
            serverPd.close();
        }
    }
}
// end example
