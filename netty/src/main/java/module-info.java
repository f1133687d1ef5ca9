/**
 * Netty over regmem: {@link io.regmem.netty.RegmemByteBufAllocator}, a {@code ByteBufAllocator} whose
 * direct buffers are a {@link io.regmem.core.BufferPool}'s buffers (and, with a
 * {@link io.regmem.registration.PoolRegistration}, registered memory with keys); and a Netty 4.2
 * transport over regmem RC connections ({@link io.regmem.netty.RegmemIoHandler} and its channels).
 *
 * <p>Grant native access to {@code io.regmem.core} ({@code --enable-native-access=io.regmem.core}).
 */
module io.regmem.netty {
    requires transitive io.regmem.registration;
    requires transitive io.netty.buffer;
    requires io.netty.common;
    requires transitive io.netty.transport;

    exports io.regmem.netty;
}
