package io.regmem.registration.shm;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

/**
 * One side's view of a connection's shared memory: a sealed memfd of a header page and four rings,
 * each written by one side only.
 * <pre>
 *    0 magic u64   8 each ring's data bytes u64
 *   64 the requester is ready u64   72 it can copy out of the listener u64   80 its QP is gone u64
 *   88 a thread of its side sleeps on the lane u32 (a futex word)   96 its side may sleep u64
 *  128 the listener is ready u64   136 it can copy out of the requester u64   144 its QP is gone u64
 *  152 a thread of its side sleeps u32   160 its side may sleep u64
 *  256 the listener's requests the requester finished: the last one's sequence + 1 u64 (0: none)
 *  264 the listener's READ grants the requester copied out: the last one's sequence + 1 u64
 *  272 the requester's grants it withdrew: the last one's sequence + 1 u64 (all up to it)
 *  384 the requester's requests the listener finished; 392 its grants copied; 400 grants withdrawn
 * 4096 the requester's requests, then its answers, then the listener's requests, then its answers
 * </pre>
 * A side's target says that it finished the peer's WRITEs and SENDs (the bytes placed, every check
 * passed) in its finished word, written once per round of serving, never in a record per request; a
 * READ's or atomic's answer, and any error, go in its answer ring, and such a record also says that
 * every request before it finished (requests execute in order, and nothing runs after an error).
 * A large READ may be answered by a grant instead of its bytes: the initiator copies them out of the
 * target's memory itself, then says so in its copied word, and the target holds the requests after
 * it that change memory until then; a target that must take its memory back (a deregistration that
 * waited long enough, an error, a destroy) withdraws its grants in its withdrawn word first, and an
 * initiator reads that word after its copy: a READ whose grant was withdrawn fails, whatever it copied.
 * The requester makes and sizes the memfd and writes the magic and size; the listener maps it only
 * once {@link SharedFile#verify} passed and then checks them. Each side says, in its words, whether
 * it can copy out of the other ({@code process_vm_readv}): an initiator lets its target pull large
 * bytes only if the target said so. The words are hints from a peer: a false one only makes that
 * peer's own copies fail.
 */
final class Lane implements AutoCloseable {
    static final long MAGIC = 0x334e_4c4d_4853_4d52L; // "RMSHMLN3" in native (little-endian) order
    static final long H_MAGIC = 0;
    static final long H_CAPACITY = 8;
    static final long H_REQUESTER_READY = 64;
    static final long H_REQUESTER_PULLS = 72;
    static final long H_LISTENER_READY = 128;
    static final long H_LISTENER_PULLS = 136;
    static final long H_REQUESTER_GONE = 80;
    static final long H_LISTENER_GONE = 144;
    static final long H_REQUESTER_SLEEPS = 88;
    static final long H_LISTENER_SLEEPS = 152;
    static final long H_REQUESTER_SLEEPER = 96;
    static final long H_LISTENER_SLEEPER = 160;
    static final long H_REQUESTER_FINISHED = 256;
    static final long H_LISTENER_FINISHED = 384;
    static final long H_REQUESTER_COPIED = 264;
    static final long H_LISTENER_COPIED = 392;
    static final long H_REQUESTER_REVOKED = 272;
    static final long H_LISTENER_REVOKED = 400;
    static final long RINGS = 4096;
    /** The default data bytes of each ring. */
    static final long DEFAULT_CAPACITY = 2L << 20;

    private static final VarHandle LONG = JAVA_LONG.varHandle();
    private static final VarHandle INT = JAVA_INT.varHandle();

    private final Arena arena;
    final MemorySegment memory;
    final boolean requester;
    /** This side's rings (it produces them). */
    final Ring myRequests;
    final Ring myAnswers;
    /** The peer's rings (this side consumes them). */
    final Ring peerRequests;
    final Ring peerAnswers;
    /** The peer's process id (this process's own for a connection inside the JVM). */
    final int peerPid;
    /** The peer process's pidfd, or null for a connection inside this JVM. */
    final PeerProcess peer;
    /** True if this side may copy out of the peer with {@code process_vm_readv} (it probed it). */
    volatile boolean pulls;

    private Lane(Arena arena, MemorySegment memory, long capacity, boolean requester, int peerPid, PeerProcess peer) {
        this.arena = arena;
        this.memory = memory;
        this.requester = requester;
        this.peerPid = peerPid;
        this.peer = peer;
        long ring = Ring.size(capacity);
        Ring[] r = new Ring[4];
        for (int i = 0; i < 4; i++) {
            r[i] = new Ring(memory.asSlice(RINGS + i * ring, ring));
        }
        myRequests = requester ? r[0] : r[2];
        myAnswers = requester ? r[1] : r[3];
        peerRequests = requester ? r[2] : r[0];
        peerAnswers = requester ? r[3] : r[1];
    }

    /** The memfd bytes of a lane whose rings have {@code capacity} data bytes each. */
    static long size(long capacity) {
        return RINGS + 4 * Ring.size(capacity);
    }

    /**
     * Makes a lane's memfd (the requester does): sealed, sized, its header written.
     *
     * @return its descriptor
     */
    static int create(long capacity) {
        int fd = SharedFile.create("regmem-shm-lane", size(capacity));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment header = SharedFile.map(fd, RINGS, a);
            header.set(JAVA_LONG, H_CAPACITY, capacity);
            header.set(JAVA_LONG, H_MAGIC, MAGIC);
        } catch (RuntimeException e) {
            SharedFile.close(fd);
            throw e;
        }
        return fd;
    }

    /**
     * Maps a lane's memfd as one side of it. The listener's side checks the header first.
     *
     * @return the lane, or null if the memory is not a lane of {@code capacity} (the arena is then closed)
     */
    static Lane attach(int fd, long capacity, boolean requester, int peerPid, PeerProcess peer) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment memory = SharedFile.map(fd, size(capacity), arena);
            if (memory.get(JAVA_LONG, H_MAGIC) != MAGIC || memory.get(JAVA_LONG, H_CAPACITY) != capacity) {
                arena.close();
                return null;
            }
            return new Lane(arena, memory, capacity, requester, peerPid, peer);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /**
     * Says whether this side can copy out of the peer and whether its progress thread may sleep
     * (then the peer wakes it: {@link #wakePeer()}), and that it is ready.
     */
    void announce(boolean canPull, boolean maySleep) {
        pulls = canPull;
        memory.set(JAVA_LONG, requester ? H_REQUESTER_SLEEPER : H_LISTENER_SLEEPER, maySleep ? 1 : 0);
        memory.set(JAVA_LONG, requester ? H_REQUESTER_PULLS : H_LISTENER_PULLS, canPull ? 1 : 0);
        LONG.setRelease(memory, requester ? H_REQUESTER_READY : H_LISTENER_READY, 1L);
    }

    /** True once the peer announced itself ({@link #announce}). */
    boolean peerReady() {
        return (long) LONG.getAcquire(memory, requester ? H_LISTENER_READY : H_REQUESTER_READY) == 1L;
    }

    /** True if the peer said it can copy out of this process (read after {@link #peerReady()}). */
    boolean peerPulls() {
        return memory.get(JAVA_LONG, requester ? H_LISTENER_PULLS : H_REQUESTER_PULLS) == 1L;
    }

    /** Says that this side's QP is gone (destroyed): the peer's QP moves to the error state at its next progress. */
    void leave() {
        LONG.setRelease(memory, requester ? H_REQUESTER_GONE : H_LISTENER_GONE, 1L);
    }

    /** True once the peer said its QP is gone. Any thread. */
    boolean peerLeft() {
        return (long) LONG.getAcquire(memory, requester ? H_LISTENER_GONE : H_REQUESTER_GONE) == 1L;
    }

    /**
     * False once the peer's process is seen to have exited ({@link PeerProcess#recentlyAlive}): asked
     * before each copy out of it by its pid. True for a peer in this JVM (no pidfd).
     */
    boolean peerRunning() {
        return peer == null || peer.recentlyAlive();
    }

    /** Says that this side finished the peer's requests up to the one with sequence {@code seq} (release). */
    void finished(long seq) {
        LONG.setRelease(memory, requester ? H_REQUESTER_FINISHED : H_LISTENER_FINISHED, seq + 1);
    }

    /** The peer's finished word: the last of this side's requests it finished, + 1 (0: none). Unchecked. */
    long peerFinished() {
        return (long) LONG.getAcquire(memory, requester ? H_LISTENER_FINISHED : H_REQUESTER_FINISHED);
    }

    /** Says that this side copied out the peer's grants up to the READ with sequence {@code seq} (release). */
    void copied(long seq) {
        LONG.setRelease(memory, requester ? H_REQUESTER_COPIED : H_LISTENER_COPIED, seq + 1);
    }

    /** The peer's copied word: the last of this side's grants it copied out, + 1 (0: none). Unchecked. */
    long peerCopied() {
        return (long) LONG.getAcquire(memory, requester ? H_LISTENER_COPIED : H_REQUESTER_COPIED);
    }

    /**
     * Withdraws this side's grants up to the READ with sequence {@code seq}: stored before the memory
     * they name may change owner (the fence orders the store before whatever this thread does next).
     */
    void revoke(long seq) {
        LONG.setVolatile(memory, requester ? H_REQUESTER_REVOKED : H_LISTENER_REVOKED, seq + 1);
        VarHandle.fullFence();
    }

    /**
     * The peer's withdrawn word: its grants up to this sequence (exclusive) are void. Read after a copy
     * (the fence orders the copy's reads before it), so that a grant seen valid here was valid for the copy.
     */
    long peerRevoked() {
        VarHandle.fullFence();
        return (long) LONG.getVolatile(memory, requester ? H_LISTENER_REVOKED : H_REQUESTER_REVOKED);
    }

    /** The address of this side's sleeping word (a 32-bit futex word in the shared memory). */
    long sleepWord() {
        return memory.address() + (requester ? H_REQUESTER_SLEEPS : H_LISTENER_SLEEPS);
    }

    /**
     * Sets or clears this side's sleeping word (set before the sleeper's last look for work). Setting
     * it also says, from now on, that this side may sleep (a side that announced it never would, and
     * now has a completion channel's waiter sleep on the lane): the peer's first publication after that
     * may miss the word (it looked at the may-sleep word before the fence), which the sleeper's
     * bounded wait covers.
     */
    void sleeping(boolean sleeps) {
        if (sleeps) {
            long mine = requester ? H_REQUESTER_SLEEPER : H_LISTENER_SLEEPER;
            if ((long) LONG.getOpaque(memory, mine) == 0L) {
                LONG.setVolatile(memory, mine, 1L);
            }
        }
        INT.setVolatile(memory, requester ? H_REQUESTER_SLEEPS : H_LISTENER_SLEEPS, sleeps ? 1 : 0);
    }

    /**
     * After this side published work into the lane: wakes the peer's sleeping thread if there is one. The
     * fence orders the publication before the look at the peer's sleeping word, as the sleeper orders
     * its word before its last look for work, so one of the two always sees the other. Nothing (not
     * even the fence) for a peer that never sleeps.
     */
    void wakePeer() {
        if ((long) LONG.getOpaque(memory, requester ? H_LISTENER_SLEEPER : H_REQUESTER_SLEEPER) != 0L) { // (it may change)
            VarHandle.fullFence();
            long word = requester ? H_LISTENER_SLEEPS : H_REQUESTER_SLEEPS;
            if ((int) INT.getVolatile(memory, word) == 1 && INT.compareAndSet(memory, word, 1, 0)) {
                Waker.wake(memory.address() + word);
            }
        }
    }

    /** Unmaps the lane (callers make sure nothing of this side reads it any more) and lets go of the peer's pidfd. */
    @Override
    public void close() {
        if (peer != null) {
            peer.close();
        }
        arena.close();
    }
}
