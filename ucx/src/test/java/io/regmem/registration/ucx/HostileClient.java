package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.link.Link;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A client that is not a regmem peer, on a plain {@link Socket}: it speaks the UCX handshake's wire
 * format ({@link Link}) as far as it likes, written here again from the format's description
 * (so the test checks the format, not the code against itself), and damages it in every way the
 * test asks. Each attack ends by waiting until the listener closed the connection.
 */
final class HostileClient {
    static final int HELLO_FIXED = 4 + 2 + 16 + 4 + 8 + 4 + 2;
    /** How long the listener may take to close a connection it refused (the test's handshake time is shorter). */
    static final int CLOSED_WITHIN_MILLIS = 5_000;

    private final String host;
    private final int port;

    HostileClient(String host, int port) {
        this.host = host;
        this.port = port;
    }

    /** Connects, reads the challenge (its nonce), sends {@code bytes}, half-closes, and waits for the listener to close. */
    void send(byte[] bytes) throws IOException {
        try (Socket s = new Socket(host, port)) {
            s.setSoTimeout(CLOSED_WITHIN_MILLIS);
            readChallenge(s);
            s.getOutputStream().write(bytes);
            s.getOutputStream().flush();
            s.shutdownOutput();
            awaitClosed(s);
        }
    }

    /** Connects and sends {@code bytes} without reading the challenge first, then waits for the close. */
    void sendBlind(byte[] bytes) throws IOException {
        try (Socket s = new Socket(host, port)) {
            s.setSoTimeout(CLOSED_WITHIN_MILLIS);
            if (bytes.length > 0) {
                s.getOutputStream().write(bytes);
                s.getOutputStream().flush();
            }
            s.shutdownOutput();
            awaitClosed(s);
        }
    }

    /**
     * Connects, reads the challenge and hands it to {@code hello}, which makes the bytes to send (a
     * HELLO built for this very challenge, then damaged); sends them, half-closes, waits for the close.
     */
    void sendFor(java.util.function.Function<byte[], byte[]> hello) throws IOException {
        try (Socket s = new Socket(host, port)) {
            s.setSoTimeout(CLOSED_WITHIN_MILLIS);
            byte[] nonce = readChallenge(s);
            s.getOutputStream().write(hello.apply(nonce));
            s.getOutputStream().flush();
            s.shutdownOutput();
            awaitClosed(s);
        }
    }

    /** The listener's challenge nonce, after checking magic and version. */
    static byte[] readChallenge(Socket s) throws IOException {
        byte[] c = s.getInputStream().readNBytes(6 + 16);
        assertThat(c).as("the listener's challenge").hasSize(22);
        ByteBuffer b = ByteBuffer.wrap(c);
        assertThat(b.getInt()).isEqualTo(Link.MAGIC);
        assertThat(b.getShort()).isEqualTo(Link.VERSION);
        byte[] nonce = new byte[16];
        b.get(nonce);
        return nonce;
    }

    /** Reads the challenge if the listener sends one (true), or its close (a listener at its limit closes at once). */
    static boolean readChallengeOrClosed(Socket s) throws IOException {
        try {
            return s.getInputStream().readNBytes(6 + 16).length == 22;
        } catch (SocketTimeoutException e) {
            throw new AssertionError("neither a challenge nor a close within " + CLOSED_WITHIN_MILLIS + " ms");
        } catch (IOException reset) {
            return false; // closed at once
        }
    }

    /** Reads until the listener closes (EOF or reset); fails if it does not within the bound. */
    static void awaitClosed(Socket s) throws IOException {
        InputStream in = s.getInputStream();
        long start = System.nanoTime();
        try {
            while (in.read() >= 0) {
                // a REJECT or anything else: keep reading until the close
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the listener did not close the connection within " + CLOSED_WITHIN_MILLIS + " ms");
        } catch (IOException reset) {
            // closed with a reset: closed all the same
        }
        assertThat((System.nanoTime() - start) / 1_000_000).isLessThan(CLOSED_WITHIN_MILLIS);
    }

    /** A HELLO as a regmem requester with {@code secret} would send it in answer to {@code nonce}. */
    static byte[] hello(byte[] secret, byte[] nonce, int qp, long token, byte[] worker, byte[] privateData) {
        ByteBuffer b = ByteBuffer.allocate(HELLO_FIXED + worker.length + privateData.length + 32);
        byte[] mine = new byte[16];
        new SplittableRandom().nextBytes(mine);
        b.putInt(Link.MAGIC).putShort(Link.VERSION).put(mine).putInt(qp).putLong(token).putInt(worker.length)
                .putShort((short) privateData.length).put(worker).put(privateData);
        b.put(hmac(secret, "regmem hello", nonce, java.util.Arrays.copyOf(b.array(), b.position())));
        return b.array();
    }

    /** A HELLO header with the lengths given and nothing after it. */
    static byte[] header(int workerLength, int privateLength) {
        ByteBuffer b = ByteBuffer.allocate(HELLO_FIXED);
        b.putInt(Link.MAGIC).putShort(Link.VERSION).put(new byte[16]).putInt(0).putLong(1).putInt(workerLength)
                .putShort((short) privateLength);
        return b.array();
    }

    static byte[] hmac(byte[] secret, String label, byte[]... parts) {
        try {
            Mac m = Mac.getInstance("HmacSHA256");
            m.init(new SecretKeySpec(secret, "HmacSHA256"));
            m.update(label.getBytes(StandardCharsets.US_ASCII));
            for (byte[] p : parts) {
                m.update(p);
            }
            return m.doFinal();
        } catch (java.security.GeneralSecurityException e) {
            throw new AssertionError(e);
        }
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new SplittableRandom(seed).nextBytes(b);
        return b;
    }

    /**
     * Every attack of the suite against the listener at {@code host:port}, each on a connection of
     * its own; returns how many connections were made. {@code secret} is the listener's (so the
     * damaged HELLOs are damaged copies of authentic ones), {@code worker} a real UCX worker address.
     */
    int attackAll(byte[] secret, byte[] worker) throws IOException {
        int n = 0;
        // garbage of every size, with and without reading the challenge first
        for (int size : new int[] {0, 1, 16, 64, 1000, 65536}) {
            sendBlind(random(size, size));
            send(random(size, size + 1));
            n += 2;
        }
        // a well-formed header whose worker address is random bytes, without the secret
        for (int size : new int[] {1, 16, 64, 1000, 65536}) {
            byte[] fake = random(size, 100 + size);
            sendFor(nonce -> hello("not the secret, not at all".getBytes(), nonce, 0, 1, fake, new byte[0]));
            n++;
        }
        // a real worker address with its first byte flipped, signed with another secret
        byte[] flipped = worker.clone();
        flipped[0] ^= (byte) 0xFF;
        sendFor(nonce -> hello("another secret, sixteen+ bytes".getBytes(), nonce, 0, 1, flipped, new byte[0]));
        n++;
        // bad magic, bad version
        sendFor(nonce -> {
            byte[] h = hello(secret, nonce, 0, 1, worker, new byte[0]);
            h[0] ^= 1;
            return h;
        });
        sendFor(nonce -> {
            byte[] h = hello(secret, nonce, 0, 1, worker, new byte[0]);
            h[5] ^= 1;
            return h;
        });
        n += 2;
        // truncated at every byte of an authentic HELLO
        int full = hello(secret, new byte[16], 0, 1, worker, new byte[] {1, 2, 3}).length;
        for (int cut = 0; cut < full; cut++) {
            int k = cut;
            sendFor(nonce -> java.util.Arrays.copyOf(hello(secret, nonce, 0, 1, worker, new byte[] {1, 2, 3}), k));
            n++;
        }
        // every bit of the fixed fields flipped, and bits all through the rest
        List<Integer> bits = new ArrayList<>();
        for (int bit = 0; bit < HELLO_FIXED * 8; bit++) {
            bits.add(bit);
        }
        for (int bit = HELLO_FIXED * 8; bit < full * 8; bit += 29) {
            bits.add(bit);
        }
        bits.add(full * 8 - 1); // the HMAC's last bit
        for (int bit : bits) {
            sendFor(nonce -> {
                byte[] h = hello(secret, nonce, 0, 1, worker, new byte[] {1, 2, 3});
                h[bit / 8] ^= (byte) (1 << (bit % 8));
                return h;
            });
            n++;
        }
        // replayed: authentic for one connection's challenge, sent on the next connection
        byte[][] recorded = new byte[1][];
        sendFor(nonce -> {
            recorded[0] = hello(secret, nonce, 0, 1, worker, new byte[0]);
            return java.util.Arrays.copyOf(recorded[0], 10); // (the recording connection itself is cut short)
        });
        send(recorded[0]);
        n += 2;
        // absurd lengths: refused from the header alone, before anything is read or allocated from them
        for (int w : new int[] {0, -1, Integer.MIN_VALUE, Link.MAX_ADDRESS + 1, Integer.MAX_VALUE}) {
            send(header(w, 0));
            n++;
        }
        for (int p : new int[] {io.regmem.registration.CmId.MAX_CONNECT_PRIVATE_DATA + 1, 65535}) {
            send(header(100, p));
            n++;
        }
        return n;
    }

    /**
     * Slow-loris: an authentic HELLO trickled one byte every {@code gapMillis}; the listener must close
     * the connection once its handshake time is over, however slowly the bytes come. Returns the
     * milliseconds it took.
     */
    long slowLoris(byte[] secret, byte[] worker, int gapMillis) throws IOException {
        try (Socket s = new Socket(host, port)) {
            s.setSoTimeout(CLOSED_WITHIN_MILLIS);
            long start = System.nanoTime();
            byte[] h = hello(secret, readChallenge(s), 0, 1, worker, new byte[0]);
            try {
                for (int i = 0; i < h.length - 1; i++) {
                    s.getOutputStream().write(h[i]);
                    s.getOutputStream().flush();
                    Thread.sleep(gapMillis);
                    if (s.getInputStream().available() > 0 || System.nanoTime() - start > CLOSED_WITHIN_MILLIS * 1_000_000L) {
                        break;
                    }
                }
            } catch (IOException closed) {
                // the listener closed it (a write into a reset connection)
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            awaitClosed(s);
            return (System.nanoTime() - start) / 1_000_000;
        }
    }
}
