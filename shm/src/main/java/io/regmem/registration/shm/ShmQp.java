package io.regmem.registration.shm;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.Opcode;
import io.regmem.registration.WcStatus;
import io.regmem.registration.spi.GracePeriod;
import io.regmem.registration.spi.MemoryAccess;
import io.regmem.registration.spi.MrContext;
import io.regmem.registration.spi.PostedWr;
import io.regmem.registration.spi.ProviderQp;
import io.regmem.registration.spi.QpContext;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.concurrent.locks.ReentrantLock;

/**
 * An shm queue pair: its send side ({@link ShmInitiator}) and its target side ({@link ShmTarget})
 * over the connection's {@link Lane}, both run under the QP's execution lock by whoever progresses it
 * (a poll of one of its CQs, the device's progress thread, or the post itself, which starts its
 * requests at once when the lock is free). Nothing of the peer is trusted: a record that breaks the
 * lane's rules ends the connection ({@link #violation}).
 */
final class ShmQp implements ProviderQp {
    private static final System.Logger LOG = System.getLogger("io.regmem.registration.shm");
    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    final ShmDevice device;
    final QpContext ctx;
    final MemoryAccess memory;
    final GracePeriod.Reader reader;
    final Copies copies = new Copies();
    final ShmInitiator initiator;
    final ShmTarget target;
    /** The connection's shared memory, once connected; null after the QP is destroyed. */
    private volatile Lane lane;
    /** The peer QP when it is in this JVM (its progress serves this QP's requests), or null. */
    volatile ShmQp localPeer;
    /** What ends the connection's life line when the peer broke the lane's rules (set before it connects), or null. */
    volatile Runnable onBroken;
    /** How a work request's remote key becomes the target's own key. */
    final RemoteKeys keys;
    /** Set once the peer is gone (its life line ended): what is left in its rings is taken, then the QP errs. */
    private volatile boolean peerGone;
    private volatile boolean destroyed;
    /** Why the lane broke, or null. */
    private volatile String broken;
    /** True once its progress failed ({@link #fault}): said once in the log. */
    private volatile boolean faulted;
    /** Looks of {@link #quiet()} (racy: any thread counts). */
    private int quietLooks;

    ShmQp(ShmDevice device, QpContext ctx) {
        this(device, ctx, RemoteKeys.TARGETS_OWN, true);
    }

    /**
     * A QP of {@code device} over {@code ctx}; {@code attach}: it is the context's provider QP (else
     * another provider's QP carries its connection over the lane, {@link SameHostLane}).
     */
    ShmQp(ShmDevice device, QpContext ctx, RemoteKeys keys, boolean attach) {
        this.device = device;
        this.ctx = ctx;
        this.keys = keys;
        this.memory = ctx.memory();
        this.reader = device.grace.newReader();
        this.initiator = new ShmInitiator(this);
        this.target = new ShmTarget(this);
        if (attach) {
            ctx.attach(this);
        }
    }

    /** Connects the QP over {@code l} and moves it to RTS. */
    void connect(Lane l) {
        ReentrantLock lock = ctx.lock();
        lock.lock();
        try {
            if (destroyed) {
                l.close();
                return;
            }
            lane = l;
        } finally {
            lock.unlock();
        }
        ctx.ready();
    }

    /**
     * Connects two QPs of this JVM ({@code active} made the request) over one lane (one memfd, mapped
     * once per side); each pulls if its device may, and says whether its device's progress thread may sleep.
     */
    static void linkLocal(ShmQp passive, ShmQp active) {
        Lane[] lanes = LaneSetup.local(passive.device.ringBytes, active.device.pull, passive.device.pull,
                active.device.sleeps(), passive.device.sleeps());
        active.localPeer = passive;
        passive.localPeer = active;
        active.connect(lanes[0]);
        passive.connect(lanes[1]);
    }

    @Override
    public void sendPosted(long firstSeq, int count) {
        ReentrantLock l = ctx.lock();
        if (lane != null && l.tryLock()) { // start at once; else the lock's holder or the next progress does
            try {
                runGuarded();
            } finally {
                l.unlock();
            }
        }
    }

    @Override
    public void recvPosted(long firstSeq, int count) {
        ReentrantLock l = ctx.lock();
        if (target.busy() && lane != null && l.tryLock()) { // a request held for a receive may go now
            try {
                runGuarded();
            } finally {
                l.unlock();
            }
        }
    }

    @Override
    public void stop() {
        // Every copy of this QP runs under its execution lock, which the caller holds: none is under way.
    }

    @Override
    public int importRemoteKey(MemorySegment exported) {
        if (exported.byteSize() != 4) {
            throw new RdmaException(Errno.EINVAL, ctx.name() + ": an shm remote key is 4 bytes, got " + exported.byteSize());
        }
        return exported.get(BE_INT, 0);
    }

    @Override
    public void destroy() {
        ReentrantLock l = ctx.lock();
        l.lock();
        try {
            if (destroyed) {
                return; // once
            }
            destroyed = true;
            ShmQp peer = localPeer;
            localPeer = null;
            if (peer != null) {
                peer.localPeer = null;
                peer.ctx.peerDisconnected(); // the peer takes what this side sent it (while it can), and loses its connection
            }
            Lane old = lane;
            lane = null;
            if (old != null) {
                target.grants.revokeAll(old); // before its memory can change owner: a deregistration no longer waits for them
                old.leave();
                old.close();
            }
            copies.close();
        } finally {
            l.unlock();
        }
        reader.close();
        device.removeQp(this);
    }

    @Override
    public String diagnostics() {
        Lane l = lane;
        String why = broken;
        return "shm: " + (l == null ? "not connected" : "lane to process " + l.peerPid + (l.pulls ? ", pulls" : ", no pulls"))
                + (device.sleeps() ? ", progress thread woken " + device.woken() + " times" : "")
                + (why != null ? ", broken: " + why : "") + (peerGone ? ", peer gone" : "");
    }

    // ---- progress ----

    /**
     * Progresses this QP and, for a peer in this JVM, that one if its lock is free (its progress serves
     * this side's requests), a few rounds while either does work, so that one poll sees a round trip
     * inside the JVM complete; the work done. Any thread.
     */
    int progress() {
        try {
            return progressRounds();
        } catch (RuntimeException | Error e) { // (this QP's fault only: the caller goes on with the others)
            return fault(e);
        }
    }

    private int progressRounds() {
        if (destroyed || (quiet() && (++quietLooks & 63) != 0)) { // every 64th: a full round (timeouts, retirements)
            return 0;
        }
        int work = 0;
        for (int round = 0; round < 3; round++) {
            int w = locked(this) + runPeer();
            work += w;
            if (w == 0 || localPeer == null) {
                break;
            }
        }
        return work;
    }

    /** One round of this QP (its lock held by the caller) and of its peer in this JVM if that one's lock is free. */
    int runWithPeer() {
        return runGuarded() + runPeer();
    }

    /** One round of the peer in this JVM, if there is one and its lock is free; the work done. */
    private int runPeer() {
        ShmQp peer = localPeer;
        if (peer == null || peer.destroyed || !peer.ctx.lock().tryLock()) {
            return 0;
        }
        try {
            return peer.runGuarded();
        } finally {
            peer.ctx.lock().unlock();
        }
    }

    private static int locked(ShmQp qp) {
        ReentrantLock l = qp.ctx.lock();
        l.lock();
        try {
            return qp.runGuarded();
        } finally {
            l.unlock();
        }
    }

    /** {@link #run()}, a failure of which errs this QP alone ({@link #fault}); lock held. */
    int runGuarded() {
        try {
            return run();
        } catch (RuntimeException | Error e) {
            return fault(e);
        }
    }

    /**
     * True if nothing waits on {@code l}, this QP's lane when the caller read it (no record from the peer,
     * nothing under way). Any thread, without the QP's lock: racy, and the lane may be unmapped under it
     * by a destroy on another thread: then the answer is "not idle", so that the caller takes the QP's
     * lock and finds it destroyed.
     */
    boolean idleLane(Lane l) {
        if (l == null) {
            return true;
        }
        try {
            return !l.peerAnswers.pending() && !l.peerRequests.pending() && !initiator.busy() && !target.busy()
                    && !peerGone && !l.peerLeft();
        } catch (IllegalStateException unmapped) {
            return false;
        }
    }

    /**
     * True if a round of progress would find nothing to do now: no record from the peer, nothing to
     * start, nothing under way at the target, and no completion due from the target's finished word
     * that somebody waits for. Any thread, without the QP's lock (racy: a wrong "quiet" only defers the
     * work to a later look; the progress itself runs a full round every 64th quiet look, with its
     * timeouts and retirements). A quiet look reads two or three lines the peer has not written, and
     * takes no lock. A QP whose peer is in this JVM is quiet only when idle, as its progress serves the
     * peer too.
     */
    boolean quiet() {
        Lane l = lane;
        if (l == null || localPeer != null) {
            return ctx.idle() && idleLane(l);
        }
        if (!ctx.isReady()) {
            return false;
        }
        try {
            return !l.peerAnswers.pending() && !l.peerRequests.pending() && !target.busy() && !peerGone
                    && initiator.quiet(l) && !l.peerLeft();
        } catch (IllegalStateException unmapped) {
            return false;
        }
    }

    /**
     * True if a poll of its CQ need not progress it (racy, any thread): it is {@link #quiet()} and
     * nobody waits for a completion it still owes (those need its answer timeout watched, so their
     * polls progress it, which runs a full round every 64th quiet look).
     */
    boolean idleForPoll() {
        return quiet() && !initiator.waitedFor();
    }

    /** This QP's lane, or null (not connected, or destroyed). */
    Lane lane() {
        return lane;
    }

    /**
     * A failure of this QP's progress that no rule of the lane describes (a fault of regmem's, or of
     * the system): the QP moves to the error state with {@code QP_FATAL} (its requests flush at the next
     * progress) and its connection ends; said once in the log. Never throws.
     */
    int fault(Throwable e) {
        try {
            if (!faulted) {
                faulted = true;
                if (broken == null) {
                    broken = "its progress failed: " + e;
                }
                LOG.log(System.Logger.Level.WARNING, "regmem shm: " + ctx.name() + ": its progress failed; the QP moves to "
                        + "the error state and the connection ends", e);
            }
            ctx.fatal("its progress failed: " + e);
            Runnable r = onBroken;
            if (r != null) {
                r.run();
            }
        } catch (RuntimeException | Error again) {
            // nothing more can be done for this QP here; the caller goes on with the others
        }
        return 1;
    }

    /** One round under the execution lock; the work done. */
    int run() {
        if (destroyed) {
            return 0;
        }
        Lane l = lane;
        int work = 0;
        if (l != null && ctx.isReady()) {
            try {
                // Read before the answers: a peer publishes its last answers before it leaves, so
                // every answer it sent before leaving is taken below, and none completes as a flush.
                boolean left = peerGone || l.peerLeft();
                work += initiator.answers(l);
                work += initiator.start(l); // (a local request posted meanwhile runs before more of the peer's are served)
                work += target.serve(l);
                work += initiator.start(l);
                if (initiator.timedOut(l, device.answerTimeoutNanos)) {
                    work++;
                }
                if (left) {
                    target.grants.revokeAll(l); // nobody copies them out now
                    ctx.toError(); // the peer's last answers were taken above: the rest is flushed
                }
                if (work > 0) {
                    l.wakePeer(); // (nothing unless the peer's progress thread may sleep)
                }
            } catch (Ring.Violation | IllegalStateException | IndexOutOfBoundsException e) {
                breakLane(e.getMessage());
            }
        }
        if (ctx.isError()) {
            initiator.reset();
            target.reset();
            ctx.flush();
            work++;
            if (l != null && !peerGone && broken == null) {
                try {
                    if (target.refuseAll(l) > 0) { // the peer's requests fail at once, unexecuted
                        l.wakePeer();
                    }
                } catch (Ring.Violation | IllegalStateException | IndexOutOfBoundsException e) {
                    breakLane(e.getMessage());
                }
            }
        }
        return work;
    }

    /** A rule of the lane broken by the peer: its connection ends. */
    Ring.Violation violation(String why) {
        return new Ring.Violation(why);
    }

    private void breakLane(String why) {
        Lane l = lane;
        if (l != null) { // (under the lock, as every caller) a peer that broke the rules copies nothing more, and learns it
            target.grants.revokeAll(l);
            l.leave();
        }
        if (broken == null) {
            broken = why;
            LOG.log(System.Logger.Level.WARNING, "regmem shm: " + ctx.name() + ": the connection ends: " + why);
        }
        ctx.toError();
        Runnable r = onBroken;
        if (r != null) {
            r.run();
        }
    }

    /**
     * The peer is gone (its life line ended, its process exited, or in this JVM it disconnected or was
     * destroyed): what it left in the rings (requests and answers) is taken now, under this QP's lock
     * ({@code wait}: waited for, else only if it is free), then the QP moves to the error state and the
     * rest is flushed. False if the lock was not free (the caller moves it to the error state).
     */
    boolean peerGone(boolean wait) {
        peerGone = true;
        ReentrantLock l = ctx.lock();
        if (wait) {
            l.lock();
        } else if (l.isHeldByCurrentThread() || !l.tryLock()) {
            return false;
        }
        try {
            runGuarded();
        } finally {
            l.unlock();
        }
        return true;
    }

    @Override
    public boolean peerDisconnected() {
        return peerGone(false);
    }

    /**
     * Sets or clears this side's sleeping word in the lane (the device's progress thread, around its
     * sleep); the word's address, or 0 if the QP has no lane. Never throws: a lane closed meanwhile is skipped.
     */
    long sleeping(boolean sleeps) {
        Lane l = lane;
        if (l == null) {
            return 0;
        }
        try {
            l.sleeping(sleeps);
            return l.sleepWord();
        } catch (IllegalStateException closed) {
            return 0;
        }
    }

    /**
     * True if a request under way will place its answer into {@code region} (a READ's bytes, an atomic's
     * value), or the peer has yet to copy out a READ this side granted from it. Under the QP's lock.
     */
    boolean answersInto(MrContext region) {
        return initiator.answersInto(region) || target.grants.through(region);
    }

    /** Gives up on {@link #answersInto}: those answers are refused, and this side's grants withdrawn. Under the QP's lock. */
    void abandonAnswersInto(MrContext region) {
        initiator.abandonAnswersInto(region);
        if (target.grants.through(region)) {
            target.grants.revokeAll(lane);
        }
    }

    // ---- local requests ----

    /** Runs a local request (the oldest of the send queue) and completes it. */
    void runLocal(PostedWr w) {
        WcStatus status;
        switch (w.opcode()) {
            case LOCAL_INV -> {
                MrContext mr = memory.invalidationTarget(w.invalidateRkey());
                status = mr == null ? WcStatus.LOC_PROT_ERR : WcStatus.SUCCESS;
                if (mr != null) {
                    memory.invalidate(mr);
                    device.grace.synchronize(); // outside any section: wait out the readers
                }
            }
            case REG_MR, REG_MR_INTEGRITY, BIND_MW -> {
                reader.enter();
                try {
                    status = w.opcode() == Opcode.BIND_MW ? memory.bindWindow(w) : memory.fastRegister(w);
                } finally {
                    reader.exit();
                }
            }
            default -> status = WcStatus.GENERAL_ERR;
        }
        ctx.completeSend(status, 0);
    }

    /** Invalidates the fast-reg MR whose key is {@code lkey} after a READ_WITH_INV placed its bytes. */
    void invalidateLocal(int lkey) {
        MrContext mr = memory.invalidationTarget(lkey);
        if (mr != null) {
            memory.invalidate(mr);
            device.grace.synchronize();
        }
    }

    boolean isDestroyed() {
        return destroyed;
    }
}
