package io.regmem.registration.testkit;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Unauthenticated connections crowding a listener's port, for tests that a real client is still
 * served: {@code idle} connections that connect and say nothing, and {@code trickling} ones that send
 * {@code trickle} one byte every {@value #TRICKLE_MILLIS} ms and connect again whenever the listener
 * closes them. Bounded: at most {@code idle + trickling} sockets at once, and its thread stops at
 * {@link #close()} (or after {@value #MAX_RECONNECTS} reconnections).
 */
public final class ConnectionCrowd implements AutoCloseable {
    /** The pause between two bytes of a trickling connection. */
    public static final int TRICKLE_MILLIS = 100;
    private static final int MAX_RECONNECTS = 100_000;

    private final InetSocketAddress address;
    private final byte[] trickle;
    private final List<Socket> idle = new ArrayList<>();
    private final Socket[] trickling;
    private final int[] sent;
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicLong reconnects = new AtomicLong();
    private final Thread thread;

    /**
     * Opens the crowd (the idle connections first) and starts trickling.
     *
     * @throws IOException if a connection cannot be made at all
     */
    public ConnectionCrowd(String host, int port, int idleCount, int tricklingCount, byte[] trickle) throws IOException {
        this.address = new InetSocketAddress(host, port);
        this.trickle = trickle.clone();
        try {
            for (int i = 0; i < idleCount; i++) {
                idle.add(connect());
            }
            trickling = new Socket[tricklingCount];
            sent = new int[tricklingCount];
            for (int i = 0; i < tricklingCount; i++) {
                trickling[i] = connect();
            }
        } catch (IOException | RuntimeException e) {
            closeAll();
            throw e;
        }
        thread = Thread.ofPlatform().daemon().name("connection-crowd").start(this::trickleLoop);
    }

    private Socket connect() throws IOException {
        Socket s = new Socket();
        try {
            s.connect(address, 10_000);
            s.setTcpNoDelay(true);
            return s;
        } catch (IOException e) {
            s.close();
            throw e;
        }
    }

    private void trickleLoop() {
        while (!stop.get()) {
            for (int i = 0; i < trickling.length && !stop.get(); i++) {
                try {
                    trickling[i].getOutputStream().write(trickle[sent[i]++ % trickle.length]);
                } catch (IOException closedByTheListener) {
                    quietly(trickling[i]);
                    sent[i] = 0;
                    if (reconnects.incrementAndGet() > MAX_RECONNECTS) {
                        return;
                    }
                    try {
                        trickling[i] = connect();
                    } catch (IOException e) {
                        return; // the listener is gone
                    }
                }
            }
            try {
                Thread.sleep(TRICKLE_MILLIS);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** How often a trickling connection was closed by the listener and connected again. */
    public long reconnects() {
        return reconnects.get();
    }

    private static void quietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    private void closeAll() {
        idle.forEach(ConnectionCrowd::quietly);
        if (trickling != null) {
            for (Socket s : trickling) {
                if (s != null) {
                    quietly(s);
                }
            }
        }
    }

    /** Stops trickling and closes every connection. */
    @Override
    public void close() throws InterruptedException {
        stop.set(true);
        thread.join(10_000);
        closeAll();
    }
}
