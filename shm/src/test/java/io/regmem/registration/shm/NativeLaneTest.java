package io.regmem.registration.shm;

import io.regmem.core.internal.Libc;
import io.regmem.core.internal.Mman;
import io.regmem.core.internal.Unistd;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The kernel pieces of the lane: a sealed memfd handed over a Unix socket and mapped twice shares its
 * bytes; a memfd without the seals, or of another size, is refused before it is mapped; the socket
 * names its peer; a pidfd sees a killed process at once and refuses a pid that is not the claimed
 * process; a probe copy reads another process's memory where the kernel allows it; nothing is left
 * open.
 */
@ExtendWith(NoLeaks.class)
class NativeLaneTest {
    private static final long SYS_GETTID = 186;
    private static final long SYS_TGKILL = 234;
    private static final int SIGPIPE = 13;


    private static long openDescriptors() throws IOException {
        try (var s = Files.list(Path.of("/proc/self/fd"))) {
            return s.count();
        }
    }

    @Test
    void aSealedMemfdPassedOverTheSocketSharesItsBytesAndNamesItsPeer() throws Exception {
        long before = openDescriptors();
        String name = "regmem-test-" + System.nanoTime();
        int listening = UnixSocket.listen(name);
        int client = UnixSocket.connect(name);
        int server = UnixSocket.accept(listening, System.nanoTime() + 5_000_000_000L, () -> false);
        int fd = SharedFile.create("lane-test", 1 << 20);
        try (Arena arena = Arena.ofShared()) {
            UnixSocket.send(client, new byte[] {1, 2, 3, 4}, fd);
            UnixSocket.Received got = UnixSocket.receive(server, 4, System.nanoTime() + 5_000_000_000L);
            assertThat(got.data()).containsExactly(1, 2, 3, 4);
            assertThat(got.fd()).isGreaterThanOrEqualTo(0).isNotEqualTo(fd);
            assertThat(SharedFile.verify(got.fd(), 1 << 20)).isNull();
            assertThat(SharedFile.verify(got.fd(), 1 << 21)).contains("not 2097152");
            MemorySegment mine = SharedFile.map(fd, 1 << 20, arena);
            MemorySegment theirs = SharedFile.map(got.fd(), 1 << 20, arena);
            mine.set(JAVA_LONG, 4096, 0x1234_5678_9abcL);
            assertThat(theirs.get(JAVA_LONG, 4096)).isEqualTo(0x1234_5678_9abcL);
            SharedFile.close(got.fd());
            assertThat(UnixSocket.peerPid(server)).isEqualTo(PeerProcess.self());
            assertThat(UnixSocket.peerPid(client)).isEqualTo(PeerProcess.self());
            try (PeerProcess p = PeerProcess.of(server, PeerProcess.startTime(PeerProcess.self()))) {
                assertThat(p.alive()).isTrue();
                assertThat(p.pid).as("the pid the kernel gives, whatever the peer claims").isEqualTo(PeerProcess.self());
            }
            // Before Linux 6.5 (no SO_PEERPIDFD) the pid is opened and its start time must be the claimed one.
            try (PeerProcess p = PeerProcess.open(PeerProcess.self(), PeerProcess.startTime(PeerProcess.self()))) {
                assertThat(p.alive()).isTrue();
            }
            assertThatThrownBy(() -> PeerProcess.open(PeerProcess.self(), 12345)).isInstanceOf(IOException.class)
                    .hasMessageContaining("not the one that connected");
            assertThat(PeerProcess.netns()).as("this process's network namespace").isPositive();
            // A probe copy out of a process (here this one) where the kernel allows it.
            long[] out = new long[1];
            assertThat(PeerProcess.probe(PeerProcess.self(), mine.address() + 4096, out)).isZero();
            assertThat(out[0]).isEqualTo(0x1234_5678_9abcL);
            assertThat(PeerProcess.probe(PeerProcess.self(), 8, out)).as("an unmapped address").isEqualTo(-Libc.EFAULT);
        } finally {
            SharedFile.close(fd);
            SharedFile.close(server);
            SharedFile.close(client);
            SharedFile.close(listening);
        }
        assertThat(openDescriptors()).isEqualTo(before);
    }

    @Test
    void anUnsealedMemfdIsRefusedAndAMissingPeerTimesOut() throws Exception {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment capture = a.allocate(Libc.CAPTURE);
            int fd = Mman.memfdCreate(capture, a.allocateFrom("unsealed"), Mman.MFD_CLOEXEC | Mman.MFD_ALLOW_SEALING);
            assertThat(fd).isGreaterThanOrEqualTo(0);
            Unistd.ftruncate(capture, fd, 1 << 16);
            assertThat(SharedFile.verify(fd, 1 << 16)).contains("not shrink, grow and seal");
            SharedFile.close(fd);
        }
        String name = "regmem-test-" + System.nanoTime();
        int listening = UnixSocket.listen(name);
        try {
            assertThatThrownBy(() -> UnixSocket.listen(name)).isInstanceOf(IOException.class).hasMessageContaining("@" + name);
            assertThatThrownBy(() -> UnixSocket.accept(listening, System.nanoTime() + 50_000_000L, () -> false))
                    .isInstanceOf(IOException.class).hasMessageContaining("did not connect");
        } finally {
            SharedFile.close(listening);
        }
        assertThatThrownBy(() -> UnixSocket.connect("regmem-nobody-" + System.nanoTime())).isInstanceOf(IOException.class);
    }

    @Test
    void aPidfdSeesAKilledProcessAndRefusesAnotherOnesPid() throws Exception {
        Process child = new ProcessBuilder("sleep", "60").start();
        int pid = (int) child.pid();
        long start = PeerProcess.startTime(pid);
        assertThat(start).isPositive();
        assertThatThrownBy(() -> PeerProcess.open(pid, start + 1)).isInstanceOf(IOException.class);
        try (PeerProcess p = PeerProcess.open(pid, start)) {
            assertThat(p.alive()).isTrue();
            assertThat(p.awaitExit(20)).isFalse();
            assertThat(p.recentlyAlive()).isTrue();
            child.destroyForcibly();
            assertThat(p.awaitExit(5_000)).isTrue();
            // The copy paths' check answers from the last one for RECHECK_NANOS at most, then asks again.
            Thread.sleep(2 * PeerProcess.RECHECK_NANOS / 1_000_000 + 1);
            assertThat(p.recentlyAlive()).isFalse();
            assertThat(p.alive()).isFalse();
            p.close();
            assertThat(p.recentlyAlive()).as("closed").isFalse();
        } finally {
            child.destroyForcibly();
            child.waitFor(10, TimeUnit.SECONDS);
        }
        assertThatThrownBy(() -> PeerProcess.open(pid, start)).isInstanceOf(IOException.class);
    }

    /**
     * A signal that interrupts the check of a live peer (a profiler's, the JVM's own: poll(2) ends with
     * EINTR whatever SA_RESTART says) is no exit: a check that took it for one refused connections
     * and failed pulled SENDs under a sampling profiler.
     */
    @Test
    void aSignalDuringTheCheckOfALivePeerIsNoExit() throws Exception {
        assumeTrue("amd64".equals(System.getProperty("os.arch")), "the syscall numbers here are x86-64's");
        Process child = new ProcessBuilder("sleep", "60").start();
        int pid = (int) child.pid();
        AtomicLong tid = new AtomicLong();
        AtomicBoolean done = new AtomicBoolean();
        int falses = 0;
        int awaits = 0;
        long checks = 0;
        Thread killer = null;
        try (PeerProcess p = PeerProcess.open(pid, PeerProcess.startTime(pid)); Arena a = Arena.ofConfined()) {
            tid.set(Unistd.syscall(a.allocate(Libc.CAPTURE), SYS_GETTID, 0, 0, 0, 0, 0, 0));
            killer = Thread.ofPlatform().start(() -> {
                try (Arena k = Arena.ofConfined()) {
                    MemorySegment capture = k.allocate(Libc.CAPTURE);
                    while (!done.get()) { // SIGPIPE: the JVM's handler ignores it, and its arrival interrupts a poll
                        Unistd.syscall(capture, SYS_TGKILL, PeerProcess.self(), tid.get(), SIGPIPE, 0, 0, 0);
                    }
                }
            });
            long end = System.nanoTime() + 1_000_000_000L;
            while (System.nanoTime() < end) {
                checks++;
                if (!p.alive()) {
                    falses++;
                }
                if ((checks & 1023) == 0 && p.awaitExit(1)) {
                    awaits++;
                }
            }
        } finally {
            done.set(true);
            if (killer != null) {
                killer.join();
            }
            child.destroyForcibly();
            child.waitFor(10, TimeUnit.SECONDS);
        }
        assertThat(checks).isPositive();
        assertThat(falses).as("checks of a live process that said it exited, of %d", checks).isZero();
        assertThat(awaits).as("waits for a live process's exit that said it exited").isZero();
    }
}
