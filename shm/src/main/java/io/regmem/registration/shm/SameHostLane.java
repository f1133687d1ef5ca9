package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Libc;
import io.regmem.registration.DeviceAttributes;
import io.regmem.registration.link.Link;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.QpContext;
import java.io.IOException;
import java.util.function.BooleanSupplier;

/**
 * The same-host lane for another provider's connections: ucx carries a connection whose two ends
 * share a host over it instead of UCX (the handshake, its secret and the QPs stay ucx's). One per
 * device: it runs its QPs' lanes in sections of the device's own grace period, so that an
 * invalidation or deregistration on the device waits for the lane's copies too, and the device's
 * deregistration calls {@link #quiesce} for the answers still to be placed. The lanes are the shm
 * provider's, with its defaults (4 KiB inline, 2 MiB rings, pulls where the kernel allows them);
 * progress is the device's: its CQs' polls and its progress thread call {@link Qp#progress} and
 * {@link #progress}; a progress thread that idles may sleep on the lanes ({@link #sleepWhenIdle}).
 *
 * <p>Not for applications: exported to {@code io.regmem.ucx} only.
 */
public final class SameHostLane implements AutoCloseable {
    private final ShmDevice engine;

    private SameHostLane(ShmDevice engine) {
        this.engine = engine;
    }

    /**
     * The lane engine of a device whose data path runs in sections of {@code grace}; requests wait
     * {@code answerTimeoutNanos} for their answers (0: for ever).
     *
     * @throws RdmaException {@link Errno#ENOSYS} where the lane's system calls are not there
     */
    public static SameHostLane open(DeviceAttributes attributes, GracePeriod grace, long answerTimeoutNanos) {
        Libc.requireBound("shm");
        try {
            LaneSetup.offer(Lane.DEFAULT_CAPACITY); // (this host's identity read once, here)
        } catch (RuntimeException | LinkageError e) {
            throw new RdmaException(Errno.ENOSYS, "shm: the same-host lane cannot start here: " + e, e);
        }
        return new SameHostLane(new ShmDevice(attributes, grace, null, Link.HANDSHAKE_MILLIS, answerTimeoutNanos,
                ShmProvider.INLINE_THRESHOLD, Lane.DEFAULT_CAPACITY, true));
    }

    /** What a requester offers in its HELLO: who it is, where its probe word is, the rings' size. */
    public byte[] requesterOffer() {
        return LaneSetup.offer(engine.ringBytes).encode();
    }

    /**
     * Checks a requester's offer: a well-formed one from a process of this host and network namespace,
     * for rings this side takes.
     *
     * @throws IOException naming the rule it breaks
     */
    public void checkRequester(byte[] offer) throws IOException {
        LaneOffer o = LaneOffer.decode(offer, false);
        String unreachable = LaneSetup.unreachable(o);
        if (unreachable != null) {
            throw new IOException(unreachable);
        }
        if (o.ringBytes() != engine.ringBytes) {
            throw new IOException("the requester asks for rings of " + o.ringBytes() + " bytes, not " + engine.ringBytes);
        }
    }

    /** True if {@code offer} is a well-formed lane offer from a process of this host (whatever its namespaces). */
    public static boolean sameHost(byte[] offer) {
        try {
            return LaneSetup.sameHost(LaneOffer.decode(offer, false));
        } catch (IOException e) {
            return false;
        }
    }

    /** A lane QP for {@code ctx}, whose provider QP is another's; {@code keys} translates its remote keys. */
    public Qp newQp(QpContext ctx, RemoteKeys keys) {
        return new Qp(engine.addQp(new ShmQp(engine, ctx, keys, false)));
    }

    /**
     * The listener's side of a lane for the request whose requester offered {@code requesterOffer}:
     * a one-time socket; send {@link Accepting#offer()} in the ACCEPT, then {@link Accepting#complete}.
     *
     * @throws IOException if the offer breaks a rule or the socket cannot be made
     */
    public Accepting accept(byte[] requesterOffer) throws IOException {
        checkRequester(requesterOffer);
        return new Accepting(LaneOffer.decode(requesterOffer, false), new LaneSetup.Listening(engine.ringBytes),
                engine.sleeps());
    }

    /**
     * The requester's side: makes the lane with the listener whose ACCEPT carried {@code listenerOffer}
     * and connects {@code qp} over it (the QP is ready then).
     *
     * @throws IOException naming what failed
     */
    public void join(Qp qp, byte[] listenerOffer, long deadline) throws IOException {
        LaneOffer theirs = LaneSetup.listenerOffer(listenerOffer, engine.ringBytes);
        qp.shm.connect(LaneSetup.join(theirs, engine.ringBytes, deadline, engine.pull, engine.sleeps()));
    }

    /** Connects two lane QPs of this JVM ({@code active} made the request) over one lane; both are ready then. */
    public static void linkLocal(Qp passive, Qp active) {
        ShmQp.linkLocal(passive.shm, active.shm);
    }

    /** The most lanes one sleep watches; more are paced by its timeout. */
    public static final int SLEEP_WORDS = Waker.MAX;

    /**
     * From now on the device's progress thread may sleep on its lanes ({@link #sleepUntilWoken}): the
     * lanes made from now on tell their peers to wake it when they publish work.
     */
    public void sleepWhenIdle() {
        engine.enableSleep();
    }

    /**
     * The progress thread, with nothing to do for a while and no other transport to watch: marks every
     * lane's sleeping word, looks for work a last time, and sleeps until a peer publishes work into one
     * of them and wakes it, or 10 ms pass ({@code words}: scratch of {@link #SLEEP_WORDS}).
     */
    public void sleepUntilWoken(long[] words) {
        engine.sleepUntilWoken(words);
    }

    /** Progresses every lane QP of the device whose lock is free or comes free (its progress thread); the work done. */
    public int progress() {
        int work = 0;
        for (ShmQp qp : engine.qps()) {
            work += qp.progress();
        }
        return work;
    }

    /**
     * For a region being deregistered (its keys already invalid, the device's sections waited out):
     * waits for the answers of READs and atomics started before that will be placed into it, and for
     * the verdicts on pulled WRITEs and SENDs from it ({@link ShmDevice#quiesce(MrContext)}).
     */
    public void quiesce(MrContext region) {
        engine.quiesce(region);
    }

    @Override
    public void close() {
        engine.close();
    }

    /** The listener's one-time socket for one request; close it when done (it closes a lane never connected). */
    public static final class Accepting implements AutoCloseable {
        private final LaneOffer requester;
        private final LaneSetup.Listening listening;
        private final boolean maySleep;
        private Lane lane;

        private Accepting(LaneOffer requester, LaneSetup.Listening listening, boolean maySleep) {
            this.requester = requester;
            this.listening = listening;
            this.maySleep = maySleep;
        }

        /** What the ACCEPT carries: the one-time socket and its ticket, this process's identity and probe word. */
        public byte[] offer() {
            return listening.offer.encode();
        }

        /**
         * Takes the requester's memfd on the socket (by {@code deadline}, or until {@code requesterGone}
         * says the requester is gone) and maps the lane.
         *
         * @throws IOException naming what failed
         */
        public void complete(long deadline, BooleanSupplier requesterGone) throws IOException {
            lane = listening.complete(requester, deadline, true, maySleep, requesterGone);
        }

        /** Connects {@code qp} over the lane (after the requester's READY): it is ready then. */
        public void connect(Qp qp) {
            Lane l = lane;
            lane = null;
            qp.shm.connect(l);
        }

        @Override
        public void close() {
            listening.close();
            if (lane != null) {
                lane.close();
                lane = null;
            }
        }
    }

    /** A connection's lane QP: its provider QP delegates its data path here once it is connected over the lane. */
    public static final class Qp {
        final ShmQp shm;

        private Qp(ShmQp shm) {
            this.shm = shm;
        }

        /** What ends the connection's life line when the peer breaks the lane's rules (before it connects). */
        public void onBroken(Runnable r) {
            shm.onBroken = r;
        }

        /** The send queue's doorbell: starts requests at once when the QP's lock is free. */
        public void sendPosted(long firstSeq, int count) {
            shm.sendPosted(firstSeq, count);
        }

        /** The receive queue's doorbell: a request held for a receive may go now. */
        public void recvPosted(long firstSeq, int count) {
            shm.recvPosted(firstSeq, count);
        }

        /** Runs the QP (and a peer of this JVM whose lock is free); the work done. */
        public int progress() {
            return shm.progress();
        }

        /** True if a round of progress would find nothing to do on the QP or its lane now (racy, any thread). */
        public boolean idle() {
            return shm.idleForPoll();
        }

        /** The life line ended: what the peer wrote is taken, then the QP errs. */
        public void peerGone() {
            shm.peerGone(true);
        }

        /** The peer in this JVM disconnected: as {@link #peerGone}, if the QP's lock is free now (else false). */
        public boolean peerDisconnected() {
            return shm.peerGone(false);
        }

        /** Ends the lane (the peer's QP errs) and forgets the QP. */
        public void destroy() {
            shm.destroy();
        }

        /** For {@code qp.diagnostics()}. */
        public String diagnostics() {
            return shm.diagnostics();
        }
    }
}
