package io.regmem.registration.delegate;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.AhAttributes;
import io.regmem.registration.DatagramDrop;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.Opcode;
import io.regmem.registration.QpType;
import io.regmem.registration.WcStatus;
import io.regmem.registration.soft.SoftProvider;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.CqContext;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.MemoryAccess;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.ProviderCm;
import io.regmem.registration.spi.ProviderCq;
import io.regmem.registration.spi.ProviderDevice;
import io.regmem.registration.spi.ProviderMr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import io.regmem.registration.spi.RdmaProvider;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A second provider, written against the provider interface alone: {@code RdmaDevice.open("delegate")}
 * wraps every object of a soft device and forwards to it, but carries its own remote-key format, so
 * the contract suites prove they depend on nothing but the interface and the provider-neutral key
 * exchange. Its exported keys are 8 bytes ({@code "DLG1"} and the soft key), and the handle an import
 * gives is the soft rkey XOR {@link #MASK}: a test that puts a raw {@code rkey()} into a work request
 * instead of an imported key fails here with a remote access error. Run the contract suites on it with
 * {@code -Dregmem.provider=delegate}.
 */
public final class DelegatingProvider implements RdmaProvider {
    /** What an imported handle differs from the soft rkey by. */
    static final int MASK = 0x2B00_0000;
    private static final int MAGIC = 0x444C_4731; // "DLG1"
    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN);
    /** Calls forwarded to soft, over every device: a test shows the delegate is really in the path. */
    public static final AtomicLong FORWARDED = new AtomicLong();
    private final SoftProvider soft = new SoftProvider();

    /** Made by {@link java.util.ServiceLoader}. */
    public DelegatingProvider() {
    }

    @Override
    public String name() {
        return "delegate";
    }

    @Override
    public ProviderDevice open(Map<String, String> options) {
        return new Device(soft.open(options));
    }

    private static <T> T counted(T t) {
        FORWARDED.incrementAndGet();
        return t;
    }

    private record Device(ProviderDevice inner) implements ProviderDevice {
        @Override
        public DeviceAttributes attributes() {
            return inner.attributes();
        }

        @Override
        public ProviderMr registerMemory(MrContext mr) {
            return new Mr(counted(inner.registerMemory(mr)));
        }

        @Override
        public ProviderQp createQp(QpContext qp) {
            return new Qp(counted(inner.createQp(new QpView(qp))), qp);
        }

        @Override
        public ProviderCq createCq(CqContext cq) {
            return new Cq(counted(inner.createCq(cq)));
        }

        @Override
        public ProviderCm createCmId(CmContext id) {
            return new Cm(counted(inner.createCmId(id)));
        }

        @Override
        public void quiesce() {
            counted(this).inner.quiesce();
        }

        @Override
        public boolean datagrams() {
            return inner.datagrams();
        }

        @Override
        public InetSocketAddress datagramEndpoint() {
            return counted(inner.datagramEndpoint());
        }

        @Override
        public int progressRound() {
            return counted(this).inner.progressRound();
        }

        @Override
        public void close() {
            inner.close();
        }
    }

    private record Mr(ProviderMr inner) implements ProviderMr {
        @Override
        public int exportedKeySize(int rkey) {
            return 4 + inner.exportedKeySize(rkey);
        }

        @Override
        public void exportRemoteKey(int rkey, MemorySegment to) {
            to.set(BE_INT, 0, MAGIC);
            inner.exportRemoteKey(rkey, to.asSlice(4));
        }

        @Override
        public void deregister() {
            inner.deregister();
        }
    }

    /**
     * Besides delegating, checks what an asynchronous provider relies on: every request a doorbell
     * announces is readable by its sequence number ({@code sendAt}/{@code recvAt}) under the post lock,
     * and a send doorbell's range ends at the queue's tail.
     */
    private record Qp(ProviderQp inner, QpContext ctx) implements ProviderQp {
        @Override
        public void sendPosted(long firstSeq, int count) {
            checkAnnounced(firstSeq, count, true);
            inner.sendPosted(firstSeq, count);
        }

        @Override
        public void recvPosted(long firstSeq, int count) {
            checkAnnounced(firstSeq, count, false);
            inner.recvPosted(firstSeq, count);
        }

        private void checkAnnounced(long firstSeq, int count, boolean send) {
            // Soft executes on pollers' threads too: only while no executor runs are the announced
            // requests certain to be uncompleted (tryLock: the post lock is held, never wait here).
            if (!ctx.lock().tryLock()) {
                return;
            }
            try {
                checkUncompleted(firstSeq, count, send);
            } finally {
                ctx.lock().unlock();
            }
        }

        private void checkUncompleted(long firstSeq, int count, boolean send) {
            PostedWr oldest = send ? ctx.nextSend() : ctx.nextRecv();
            if (oldest == null || oldest.seq() > firstSeq) {
                return; // executed already, by a poll between the append and this doorbell
            }
            for (long seq = firstSeq; seq < firstSeq + count; seq++) {
                PostedWr w = send ? ctx.sendAt(seq) : ctx.recvAt(seq);
                if (w.seq() != seq) {
                    throw new AssertionError((send ? "sendAt(" : "recvAt(") + seq + ") returned request " + w.seq());
                }
            }
            if (send && ctx.sendTail() != firstSeq + count) {
                throw new AssertionError("announced up to " + (firstSeq + count) + ", tail at " + ctx.sendTail());
            }
        }

        @Override
        public void stop() {
            inner.stop();
        }

        @Override
        public int importRemoteKey(MemorySegment exported) {
            if (exported.byteSize() < 4 || exported.get(BE_INT, 0) != MAGIC) {
                throw new RdmaException(Errno.EINVAL, "delegate: not a delegate remote key (" + exported.byteSize()
                        + " bytes)");
            }
            return inner.importRemoteKey(exported.asSlice(4)) ^ MASK;
        }

        @Override
        public void destroy() {
            inner.destroy();
        }

        @Override
        public boolean peerDisconnected() {
            return inner.peerDisconnected();
        }

        @Override
        public void releaseMemory(Arena memory) {
            inner.releaseMemory(memory);
        }

        @Override
        public void attachMulticast(InetAddress gid) {
            counted(inner).attachMulticast(gid);
        }

        @Override
        public void detachMulticast(InetAddress gid) {
            counted(inner).detachMulticast(gid);
        }

        @Override
        public <T> T unwrap(Class<T> type) {
            return type.isInstance(this) ? type.cast(this) : inner.unwrap(type);
        }
    }

    private record Cq(ProviderCq inner) implements ProviderCq {
        @Override
        public void progress() {
            inner.progress();
        }

        @Override
        public boolean idle() {
            return inner.idle();
        }

        @Override
        public boolean progressesOnItsOwn() {
            return inner.progressesOnItsOwn();
        }

        @Override
        public void attach(ProviderQp qp, boolean sends, boolean receives) {
            inner.attach(counted(((Qp) qp).inner()), sends, receives); // soft's own QP, not this wrapper
        }

        @Override
        public void detach(ProviderQp qp) {
            inner.detach(((Qp) qp).inner());
        }

        @Override
        public void destroy() {
            inner.destroy();
        }
    }

    private record Cm(ProviderCm inner) implements ProviderCm {
        @Override
        public LocalRendezvous.End localEnd() {
            return inner.localEnd();
        }

        @Override
        public String bind(String address) {
            return inner.bind(address);
        }

        @Override
        public void listen(String address) {
            inner.listen(address);
        }

        @Override
        public void connect(String address, byte[] privateData) {
            inner.connect(address, privateData);
        }

        @Override
        public void accept(byte[] privateData) {
            inner.accept(privateData);
        }

        @Override
        public void reject(byte[] privateData) {
            inner.reject(privateData);
        }

        @Override
        public void disconnect() {
            inner.disconnect();
        }

        @Override
        public void destroy() {
            inner.destroy();
        }
    }

    /** The QP as soft sees it: every request's remote keys turned back from handles into soft keys. */
    private static final class QpView implements QpContext {
        private final QpContext real;
        private final WrView send = new WrView();
        private final WrView recv = new WrView();
        private final WrView at = new WrView();

        QpView(QpContext real) {
            this.real = real;
        }

        @Override
        public String name() {
            return real.name();
        }

        @Override
        public boolean isDestroyed() {
            return real.isDestroyed();
        }

        @Override
        public int maxSendWr() {
            return real.maxSendWr();
        }

        @Override
        public int rnrRetry() {
            return real.rnrRetry();
        }

        @Override
        public long minRnrTimerNanos() {
            return real.minRnrTimerNanos();
        }

        @Override
        public boolean isReady() {
            return real.isReady();
        }

        @Override
        public boolean isError() {
            return real.isError();
        }

        @Override
        public ReentrantLock lock() {
            return real.lock();
        }

        @Override
        public CqContext sendCq() {
            return real.sendCq();
        }

        @Override
        public CqContext recvCq() {
            return real.recvCq();
        }

        @Override
        public boolean idle() {
            return real.idle();
        }

        @Override
        public long sendTail() {
            return real.sendTail();
        }

        @Override
        public PostedWr nextSend() {
            return send.over(real.nextSend());
        }

        @Override
        public PostedWr sendAt(long seq) {
            return at.over(real.sendAt(seq));
        }

        @Override
        public PostedWr recvAt(long seq) {
            return at.over(real.recvAt(seq));
        }

        @Override
        public void completeSend(WcStatus status, long bytes) {
            real.completeSend(status, bytes);
        }

        @Override
        public PostedWr nextRecv() {
            return recv.over(real.nextRecv());
        }

        @Override
        public void completeRecv(WcStatus status, Opcode opcode, long bytes, boolean withImm, int immData,
                                 boolean withInvalidate, int invalidatedRkey, boolean solicited) {
            real.completeRecv(status, opcode, bytes, withImm, immData, withInvalidate, invalidatedRkey, solicited);
        }

        @Override
        public void ready() {
            real.ready();
        }

        @Override
        public void toError() {
            real.toError();
        }

        @Override
        public void peerDisconnected() {
            real.peerDisconnected();
        }

        @Override
        public void fatal(String why) {
            real.fatal(why);
        }

        @Override
        public void flush() {
            real.flush();
        }

        @Override
        public Object attachment() {
            return real.attachment();
        }

        @Override
        public void attach(Object state) {
            real.attach(state);
        }

        @Override
        public MemoryAccess memory() {
            return real.memory();
        }

        @Override
        public QpType qpType() {
            return real.qpType();
        }

        @Override
        public int qpNum() {
            return real.qpNum();
        }

        @Override
        public int qkey() {
            return real.qkey();
        }

        @Override
        public boolean blocksSelfMulticastLoopback() {
            return real.blocksSelfMulticastLoopback();
        }

        @Override
        public int pathMtu() {
            return real.pathMtu();
        }

        @Override
        public int trafficClass() {
            return real.trafficClass();
        }

        @Override
        public void completeDatagram(long bytes, boolean withImm, int immData, boolean solicited, int srcQp,
                                     AhAttributes source) {
            real.completeDatagram(bytes, withImm, immData, solicited, srcQp, source);
        }

        @Override
        public void dropDatagram(DatagramDrop reason) {
            real.dropDatagram(reason);
        }

        @Override
        public void multicastLost(java.net.InetAddress group, int status) {
            real.multicastLost(group, status);
        }
    }

    /** A request as soft sees it: imported handles back to soft keys (the queue's head; reused). */
    private static final class WrView implements PostedWr {
        private PostedWr w;

        PostedWr over(PostedWr head) {
            if (head == null) {
                return null;
            }
            w = head;
            return this;
        }

        @Override
        public int rkey() {
            Opcode op = w.opcode();
            boolean remote = op == Opcode.RDMA_WRITE || op == Opcode.RDMA_WRITE_WITH_IMM || op == Opcode.RDMA_READ
                    || op == Opcode.RDMA_READ_WITH_INV || op.isAtomic();
            return remote ? w.rkey() ^ MASK : w.rkey();
        }

        @Override
        public int invalidateRkey() {
            return w.opcode() == Opcode.SEND_WITH_INV ? w.invalidateRkey() ^ MASK : w.invalidateRkey();
        }

        @Override
        public long wrId() {
            return w.wrId();
        }

        @Override
        public boolean solicited() {
            return w.solicited();
        }

        @Override
        public MemorySegment inlineData() {
            return w.inlineData();
        }

        @Override
        public Opcode opcode() {
            return w.opcode();
        }

        @Override
        public boolean signaled() {
            return w.signaled();
        }

        @Override
        public int numSge() {
            return w.numSge();
        }

        @Override
        public long sgeAddress(int i) {
            return w.sgeAddress(i);
        }

        @Override
        public long sgeLength(int i) {
            return w.sgeLength(i);
        }

        @Override
        public int sgeLkey(int i) {
            return w.sgeLkey(i);
        }

        @Override
        public long totalLength() {
            return w.totalLength();
        }

        @Override
        public long remoteAddress() {
            return w.remoteAddress();
        }

        @Override
        public int immData() {
            return w.immData();
        }

        @Override
        public long compareAdd() {
            return w.compareAdd();
        }

        @Override
        public long swap() {
            return w.swap();
        }

        @Override
        public MrContext regMr() {
            return w.regMr();
        }

        @Override
        public io.regmem.registration.spi.MwContext bindMw() {
            return w.bindMw();
        }

        @Override
        public long bindLength() {
            return w.bindLength();
        }

        @Override
        public int regKey() {
            return w.regKey();
        }

        @Override
        public int regAccess() {
            return w.regAccess();
        }

        @Override
        public long seq() {
            return w.seq();
        }

        @Override
        public AhAttributes udAddress() {
            return w.udAddress();
        }

        @Override
        public int remoteQpn() {
            return w.remoteQpn();
        }

        @Override
        public int remoteQkey() {
            return w.remoteQkey();
        }
    }
}
