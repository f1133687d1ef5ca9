package io.regmem.registration.ucx;

import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.CmEvent;
import io.regmem.registration.CmId;
import io.regmem.registration.JoinFlag;
import io.regmem.registration.Opcode;
import io.regmem.registration.PortSpace;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.UdNode;
import io.regmem.registration.testkit.ChildSide;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The other process of {@link UcxDatagramProcessTest}: a UCX device (its secret from
 * {@code REGMEM_SECRET}) with three listeners on the loopback, each said on stdout with its address:
 * {@code LISTENING udp} answers rdma_cm's UD address exchange with an echo QP that sends every datagram
 * back to its sender, {@code LISTENING reject} rejects every request with the private data
 * {@code "full"}, {@code LISTENING tcp} is a TCP port space listener that answers nothing. And a full
 * member of the group in its second argument ({@code JOINED} once the join event came): a datagram
 * of the group is 16 bytes, a sequence number and a kind ({@link #DATA} or {@link #ACK}); the member
 * acknowledges every DATA of the group by an ACK with its number, unicast to its sender.
 * {@code PUBLISH n} sends DATA 0 to n-1 to the group, each until the test's ACK of it came (resent
 * every 100 ms), then says {@code PUBLISHED}. At most two UD exchanges are answered. The end of its input
 * tears everything down and says {@code CLEAN}. A third argument gives the device's options
 * ({@code k=v,k=v}: {@code datagramBind}, say).
 */
public final class UcxDatagramPeerMain {
    private static final int ECHO_SLOTS = 16;
    /** The second 8 bytes of a group datagram: its kind. */
    static final long DATA = 0;
    static final long ACK = 1;

    private UcxDatagramPeerMain() {
    }

    public static void main(String[] args) throws Throwable {
        ConcurrentLinkedQueue<String> commands = ChildSide.commands();
        InetAddress group = InetAddress.getByName(args[1]);
        Map<String, String> options = ChildSide.options(args, 2); // a third argument: device options, "k=v,k=v"
        RdmaDevice dev = RdmaDevice.open("ucx", options);
        UdNode n = new UdNode(dev, 64);
        List<CmId> ids = new ArrayList<>();
        List<QueuePair> echoes = new ArrayList<>();
        // Requests arrive on the CM's threads: this loop answers them (the node is not thread-safe).
        ConcurrentLinkedQueue<CmEvent> requests = new ConcurrentLinkedQueue<>();
        CmId udp = listener(n, PortSpace.UDP, args[0], ids, requests);
        CmId rejecting = listener(n, PortSpace.UDP, args[0], ids, requests);
        CmId tcp = listener(n, PortSpace.TCP, args[0], ids, requests);
        ChildSide.say("LISTENING udp " + udp.localAddress());
        ChildSide.say("LISTENING reject " + rejecting.localAddress());
        ChildSide.say("LISTENING tcp " + tcp.localAddress());
        CmId member = dev.createCmId(PortSpace.UDP);
        ids.add(member);
        member.onEvent(e -> {
            if (e.type() == CmEvent.Type.MULTICAST_JOIN) {
                ChildSide.say("JOINED");
            }
            return false;
        });
        member.bindAddr("127.0.0.1:0");
        QueuePair mq = member.createQp(n.pd, QpInitAttributes.of(n.cq).maxRecvWr(8).maxSendWr(64)
                .blockSelfMulticastLoopback(true));
        for (int i = 0; i < 8; i++) {
            n.postRecv(mq, 48 + i, 256);
        }
        member.joinMulticast(group, JoinFlag.FULLMEMBER);
        AddressHandle toGroup = n.ah(AhAttributes.of(group));
        Map<AhAttributes, AddressHandle> back = new HashMap<>();
        WorkRequest wr = new WorkRequest(1);
        long publishing = -1;
        long publishEnd = 0;
        long acked = -1;
        long resendAt = 0;
        boolean end = false;
        while (!end) {
            for (CmEvent e; (e = requests.poll()) != null; ) {
                CmId request = e.id();
                ids.add(request);
                if (e.listener() == rejecting || echoes.size() == 2) {
                    request.reject("full".getBytes());
                } else if (e.listener() == udp) {
                    QueuePair qp = request.createQp(n.pd, QpInitAttributes.of(n.cq).maxRecvWr(ECHO_SLOTS)
                            .maxSendWr(ECHO_SLOTS));
                    for (int i = 0; i < ECHO_SLOTS; i++) {
                        n.postRecv(qp, ECHO_SLOTS * echoes.size() + i, UdNode.SLOT);
                    }
                    echoes.add(qp);
                    request.accept("echo".getBytes());
                }
            }
            for (String c; (c = commands.poll()) != null; ) {
                if (c.equals("END")) {
                    end = true;
                } else if (c.startsWith("PUBLISH ")) {
                    publishEnd = Long.parseLong(c.substring(8));
                    publishing = 0;
                    acked = -1;
                    resendAt = 0;
                }
            }
            if (publishing >= 0 && System.nanoTime() >= resendAt) { // the next (or again the last) sequence number
                n.slot(63).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, publishing);
                n.slot(63).set(ValueLayout.JAVA_LONG_UNALIGNED, 8, DATA);
                mq.postSend(n.send(wr, 63, 16).ud(toGroup, AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY));
                resendAt = System.nanoTime() + 100_000_000L;
            }
            WorkCompletion wc = n.poll();
            if (wc == null) {
                Thread.onSpinWait();
                continue;
            }
            if (wc.status() != WcStatus.SUCCESS) {
                ChildSide.say("FAILED " + wc);
                continue;
            }
            if (wc.opcode() != Opcode.RECV) {
                continue;
            }
            int slot = (int) wc.wrId();
            AddressHandle ah = back.computeIfAbsent(wc.source(), n::ah);
            QueuePair qp = wc.qp();
            if (qp == mq) {
                long seq = n.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
                long kind = n.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 48);
                if (kind == ACK) {
                    if (publishing >= 0 && seq == publishing) {
                        acked = seq;
                    }
                } else if (kind == DATA) { // a datagram of the group: acknowledged to its sender
                    n.slot(62).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
                    n.slot(62).set(ValueLayout.JAVA_LONG_UNALIGNED, 8, ACK);
                    mq.postSend(n.send(wr, 62, 16).ud(ah, wc.srcQp(), QpInitAttributes.RDMA_UDP_QKEY));
                }
                n.postRecv(qp, slot, 256);
            } else {
                long length = wc.byteLen() - 40;
                n.slot(61).copyFrom(n.slot(slot).asSlice(40, length));
                qp.postSend(n.send(wr, 61, length).ud(ah, wc.srcQp(), QpInitAttributes.RDMA_UDP_QKEY));
                n.postRecv(qp, slot, UdNode.SLOT);
            }
            if (publishing >= 0 && acked == publishing) {
                publishing++;
                resendAt = 0;
                if (publishing == publishEnd) {
                    publishing = -1;
                    ChildSide.say("PUBLISHED");
                }
            }
        }
        for (CmId id : ids.reversed()) {
            if (!id.isDestroyed()) {
                if (id.qp() != null) {
                    id.destroyQp();
                }
                id.close();
            }
        }
        n.close(); // (its address handles, memory, CQ, PD and the device)
        ChildSide.say("CLEAN");
    }

    private static CmId listener(UdNode n, PortSpace space, String address, List<CmId> ids,
                                 ConcurrentLinkedQueue<CmEvent> requests) {
        CmId id = n.device.createCmId(space);
        ids.add(id);
        id.onEvent(e -> {
            if (e.type() == CmEvent.Type.CONNECT_REQUEST) {
                requests.add(e);
            }
            return false;
        });
        id.bindAddr(address);
        id.listen();
        return id;
    }

}
