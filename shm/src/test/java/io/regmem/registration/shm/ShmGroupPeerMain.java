package io.regmem.registration.shm;

import io.regmem.registration.AddressHandle;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpInitAttributes;
import io.regmem.registration.QueuePair;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.WcStatus;
import io.regmem.registration.WorkCompletion;
import io.regmem.registration.WorkRequest;
import io.regmem.registration.testkit.ChildSide;
import io.regmem.registration.testkit.UdNode;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The other process of {@link ShmGroupProcessTest}: an shm device (its secret from
 * {@code REGMEM_SECRET}, its options from the third argument, {@code k=v,k=v}) that is either a
 * {@code member} of the group in the second argument (a UD QP attached to it, {@link #RECEIVES}
 * receives kept posted; {@code REPORT} says what it received and what its device dropped) or a
 * {@code publisher} ({@code PUBLISH n} sends n datagrams of {@link #BYTES} bytes to the group, then
 * says {@code PUBLISHED n}). Every datagram is {@link #fill filled} from its sequence number, which a
 * member checks ({@code bad=} counts the datagrams that are not whole). The end of its input tears
 * everything down and says {@code CLEAN}.
 */
public final class ShmGroupPeerMain {
    static final int BYTES = 64;
    static final int RECEIVES = 60;

    private ShmGroupPeerMain() {
    }

    /** Fills {@code slot}'s first {@link #BYTES} bytes from {@code seq}: the number, then bytes derived from it. */
    static void fill(UdNode n, int slot, long seq) {
        n.slot(slot).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
        for (int i = 8; i < BYTES; i++) {
            n.slot(slot).set(ValueLayout.JAVA_BYTE, i, (byte) (seq * 31 + i));
        }
    }

    /** The sequence number of the datagram received at {@code slot} (after its 40-byte GRH area), or -1 if it is not whole. */
    static long check(UdNode n, int slot, long byteLen) {
        if (byteLen != 40 + BYTES) {
            return -1;
        }
        long seq = n.slot(slot).get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
        for (int i = 8; i < BYTES; i++) {
            if (n.slot(slot).get(ValueLayout.JAVA_BYTE, 40 + i) != (byte) (seq * 31 + i)) {
                return -1;
            }
        }
        return seq;
    }

    public static void main(String[] args) throws Throwable {
        ConcurrentLinkedQueue<String> commands = ChildSide.commands();
        InetAddress group = InetAddress.getByName(args[1]);
        Map<String, String> options = ChildSide.options(args, 2);
        RdmaDevice dev = RdmaDevice.open("shm", options);
        UdNode n = new UdNode(dev, 64);
        QueuePair qp = n.qp();
        boolean member = args[0].equals("member");
        if (member) {
            qp.attachMulticast(group);
            for (int i = 0; i < RECEIVES; i++) {
                n.postRecv(qp, i, 256);
            }
            ChildSide.say("JOINED");
        } else {
            ChildSide.say("READY");
        }
        AddressHandle toGroup = n.ah(AhAttributes.of(group));
        long received = 0;
        long bad = 0;
        long last = -1;
        long publish = 0;
        long sent = 0;
        long done = 0;
        boolean end = false;
        while (!end) {
            for (String c; (c = commands.poll()) != null; ) {
                if (c.equals("END")) {
                    end = true;
                } else if (c.equals("REPORT")) {
                    ChildSide.say("GOT received=" + received + " bad=" + bad + " lost="
                            + dev.counters().datagramsDropped(DatagramDrop.LOST) + " noreceive="
                            + dev.counters().datagramsDropped(DatagramDrop.NO_RECEIVE) + " last=" + last);
                } else if (c.startsWith("PUBLISH ")) {
                    publish += Long.parseLong(c.substring(8));
                }
            }
            if (sent < publish) {
                fill(n, 63, sent);
                if (qp.tryPostSend(n.send(new WorkRequest(1), 63, BYTES).ud(toGroup,
                        AhAttributes.MULTICAST_QPN, QpInitAttributes.RDMA_UDP_QKEY)) != QueuePair.BACK_PRESSURED) {
                    sent++;
                }
            }
            WorkCompletion wc = n.poll();
            if (wc == null) {
                Thread.onSpinWait();
                continue;
            }
            if (wc.status() != WcStatus.SUCCESS) {
                ChildSide.say("FAILED " + wc);
            } else if (wc.opcode() == Opcode.RECV) {
                long seq = check(n, (int) wc.wrId(), wc.byteLen());
                if (seq < 0 || seq <= last) {
                    bad++;
                } else {
                    last = seq;
                }
                received++;
                n.postRecv(qp, (int) wc.wrId(), 256);
            } else if (++done == publish) {
                ChildSide.say("PUBLISHED " + done);
            }
        }
        if (member) {
            qp.detachMulticast(group);
        }
        n.close();
        ChildSide.say("CLEAN");
    }
}
