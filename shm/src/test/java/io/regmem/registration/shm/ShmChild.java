package io.regmem.registration.shm;

import io.regmem.registration.testkit.ChildJvm;
import java.io.IOException;

/**
 * A child JVM ({@link ChildJvm}) running {@link ShmPeerMain} (an shm listener on the loopback), or
 * another main class of the shm tests.
 */
final class ShmChild extends ChildJvm {
    final String address;

    /** A child listening at 127.0.0.1:{@code port} with the device options {@code options} ({@code k=v,k=v}). */
    ShmChild(int port, String options) throws IOException {
        this("127.0.0.1:" + port, options, "");
    }

    /** A child with a mode of its own ({@code client <hex key> <address>}: it connects to {@code address}). */
    ShmChild(String address, String options, String mode) throws IOException {
        this(address, ShmPeerMain.class, address, options, mode);
    }

    /** A child running {@code main} with {@code args}. */
    ShmChild(String address, Class<?> main, String... args) throws IOException {
        // A fixed heap, touched at start: the child's resident memory then grows only by what is not heap.
        super(ChildJvm.of(main).jvm("-Xms96m", "-Xmx96m", "-XX:+AlwaysPreTouch", "-XX:NativeMemoryTracking=summary")
                .args(args));
        this.address = address;
    }
}
