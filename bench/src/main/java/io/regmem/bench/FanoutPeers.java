package io.regmem.bench;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.FragmentHandler;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingMillisIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.YieldingIdleStrategy;
import org.agrona.concurrent.broadcast.BroadcastBufferDescriptor;
import org.agrona.concurrent.broadcast.BroadcastReceiver;
import org.agrona.concurrent.broadcast.BroadcastTransmitter;
import org.agrona.concurrent.broadcast.CopyBroadcastReceiver;
import org.agrona.concurrent.MessageHandler;

/**
 * {@link MulticastFanout}'s peers: Aeron 1.47 ({@code aeron-udp}, {@code aeron-ipc}, and
 * {@code aeron-ipc-copy}, whose subscriber copies each whole message out of the log before it reads it,
 * as a posted receive takes a datagram whole), through the host's one media driver; and Agrona's
 * one-to-many broadcast buffer ({@code agrona-broadcast}: {@code BroadcastTransmitter} and
 * {@code CopyBroadcastReceiver}, the protocol of regmem's group rings, without the verbs around it) in
 * a file of {@code /dev/shm} that the publisher and every subscriber map.
 */
final class FanoutPeers {
    /** The broadcast buffer's capacity: regmem's default group ring. */
    private static final int BROADCAST_CAPACITY = 1 << 20;
    private static final int PORT = 40470;

    private FanoutPeers() {
    }

    /**
     * The driver thread's idle strategy, {@code -Dfanout.driverIdle}: {@code yield} (the default) or
     * {@code sleep} (1 ms between duty cycles: IPC moves no data through the driver, and on a machine
     * with fewer cores than spinning threads a yielding driver takes one from a client).
     */
    static IdleStrategy driverIdle() {
        String idle = System.getProperty("fanout.driverIdle", "yield");
        return switch (idle) {
            case "yield" -> new YieldingIdleStrategy();
            case "sleep" -> new SleepingMillisIdleStrategy(1);
            default -> throw new IllegalArgumentException("fanout.driverIdle is yield or sleep, not " + idle);
        };
    }

    /** The host's one media driver for every Aeron process of the run, in {@code dir}, until its input ends. */
    static void driver(String dir) throws Exception {
        try (MediaDriver driver = MediaDriver.launch(new MediaDriver.Context()
                .aeronDirectoryName(dir)
                .threadingMode(ThreadingMode.SHARED)
                .sharedIdleStrategy(driverIdle())
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true))) {
            System.out.println("READY " + driver.aeronDirectoryName());
            System.out.flush();
            while (System.in.read() >= 0) {
                Thread.onSpinWait(); // (until the script closes its input)
            }
        }
    }

    private static String channel(String transport, InetAddress group) {
        return transport.startsWith("aeron-ipc") ? "aeron:ipc"
                : "aeron:udp?endpoint=" + group.getHostAddress() + ":" + PORT + "|interface=" + MulticastFanout.INTERFACE;
    }

    static void aeronSub(String transport, InetAddress group, long count, String dir) throws Exception {
        try (Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(dir));
             Subscription sub = aeron.addSubscription(channel(transport, group), 2001)) {
            System.out.println("READY");
            System.out.flush();
            MulticastFanout.Seen seen = new MulticastFanout.Seen();
            seen.measuredFrom = count / 4;
            UnsafeBuffer copy = new UnsafeBuffer(ByteBuffer.allocateDirect(MulticastFanout.SIZE));
            FragmentHandler onMessage = transport.endsWith("-copy")
                    ? (buffer, offset, length, header) -> { // (the whole message taken out, as into a posted receive)
                        buffer.getBytes(offset, copy, 0, length);
                        seen.record(copy.getLong(0), copy.getLong(8));
                    }
                    : (buffer, offset, length, header) -> seen.record(buffer.getLong(offset), buffer.getLong(offset + 8));
            while (!seen.done(count)) {
                if (MulticastFanout.PARTS) {
                    seen.pollStart = System.nanoTime();
                }
                if (sub.poll(onMessage, 32) == 0) {
                    Thread.onSpinWait();
                }
            }
            seen.report(transport, count);
        }
    }

    static void aeronPub(String transport, InetAddress group, long count, long rate, String dir) throws Exception {
        try (Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(dir));
             ExclusivePublication pub = aeron.addExclusivePublication(channel(transport, group), 2001)) {
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!pub.isConnected() && System.nanoTime() < deadline) {
                Thread.yield();
            }
            UnsafeBuffer message = new UnsafeBuffer(ByteBuffer.allocateDirect(MulticastFanout.SIZE));
            Histogram post = new Histogram(60_000_000_000L, 3);
            long start = System.nanoTime();
            long backPressured = 0;
            for (long seq = 0; seq < count; seq++) {
                long stamp = stampWhenDue(message, start, seq, rate);
                while (pub.offer(message, 0, MulticastFanout.SIZE) < 0) {
                    backPressured++;
                    Thread.onSpinWait();
                }
                if (MulticastFanout.PARTS && seq >= count / 4) {
                    post.recordValue(System.nanoTime() - stamp);
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf(Locale.ROOT, "SENT %s %d in %.3f s: %.0f messages/s (offers back-pressured %d)%s%n", transport,
                    count, seconds, count / seconds, backPressured, MulticastFanout.parts(post));
            Thread.sleep(500); // (the driver sends what is still in the term)
        }
    }

    /** Spins until message {@code seq} is due at {@code rate} from {@code start}, then writes its number and stamp: the stamp. */
    private static long stampWhenDue(UnsafeBuffer message, long start, long seq, long rate) {
        long due = start + seq * 1_000_000_000L / rate;
        while (System.nanoTime() < due) {
            Thread.onSpinWait();
        }
        message.putLong(0, seq);
        long stamp = System.nanoTime();
        message.putLong(8, stamp);
        return stamp;
    }

    /** The broadcast buffer's file, {@code -Dfanout.dir} (the run's own directory), mapped whole (made zeroed if new). */
    private static UnsafeBuffer broadcastBuffer() throws IOException {
        Path file = Path.of(System.getProperty("fanout.dir", "/dev/shm"), "broadcast");
        long size = BROADCAST_CAPACITY + BroadcastBufferDescriptor.TRAILER_LENGTH;
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw"); FileChannel ch = f.getChannel()) {
            if (f.length() < size) {
                f.setLength(size);
            }
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_WRITE, 0, size); // (stays mapped after the close)
            return new UnsafeBuffer(map);
        }
    }

    /** An Agrona broadcast subscriber: copies each message out ({@code CopyBroadcastReceiver}), then reads it. */
    static void broadcastSub(long count) throws IOException {
        CopyBroadcastReceiver receiver = new CopyBroadcastReceiver(new BroadcastReceiver(broadcastBuffer()),
                new UnsafeBuffer(ByteBuffer.allocateDirect(4096)));
        System.out.println("READY");
        System.out.flush();
        MulticastFanout.Seen seen = new MulticastFanout.Seen();
        seen.measuredFrom = count / 4;
        long lapped = 0;
        MessageHandler onMessage = (type, buffer, index, length) -> seen.record(buffer.getLong(index), buffer.getLong(index + 8));
        while (!seen.done(count)) {
            if (MulticastFanout.PARTS) {
                seen.pollStart = System.nanoTime();
            }
            int n;
            try {
                n = receiver.receive(onMessage);
            } catch (IllegalStateException behind) { // ("unable to keep up with broadcast": lapped, it goes on at the latest)
                lapped++;
                n = 0;
            }
            if (n == 0) {
                Thread.onSpinWait();
            }
        }
        seen.report("agrona-broadcast", count);
        System.out.println("DROPPED lapped " + lapped + " time(s)");
    }

    /** The Agrona broadcast publisher: {@code BroadcastTransmitter.transmit} of each message, paced as regmem's. */
    static void broadcastPub(long count, long rate) throws IOException {
        BroadcastTransmitter transmitter = new BroadcastTransmitter(broadcastBuffer());
        UnsafeBuffer message = new UnsafeBuffer(ByteBuffer.allocateDirect(MulticastFanout.SIZE));
        Histogram post = new Histogram(60_000_000_000L, 3);
        long start = System.nanoTime();
        for (long seq = 0; seq < count; seq++) {
            long stamp = stampWhenDue(message, start, seq, rate);
            transmitter.transmit(1, message, 0, MulticastFanout.SIZE);
            if (MulticastFanout.PARTS && seq >= count / 4) {
                post.recordValue(System.nanoTime() - stamp);
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        System.out.printf(Locale.ROOT, "SENT agrona-broadcast %d in %.3f s: %.0f messages/s%s%n", count, seconds, count / seconds,
                MulticastFanout.parts(post));
        Files.deleteIfExists(Path.of(System.getProperty("fanout.dir", "/dev/shm"), "broadcast"));
    }
}
