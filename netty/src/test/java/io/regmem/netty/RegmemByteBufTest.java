package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.util.IllegalReferenceCountException;
import io.regmem.core.BufferPool;
import io.regmem.core.Errno;
import io.regmem.core.LeakReport;
import io.regmem.core.PooledBuffer;
import io.regmem.core.RdmaException;
import io.regmem.registration.Access;
import io.regmem.registration.PoolRegistration;
import io.regmem.registration.ProtectionDomain;
import io.regmem.registration.RdmaDevice;
import io.regmem.registration.testkit.NoLeaks;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Netty's buffer contract on regmem's ByteBufs, what the allocator promises, and wrong use. */
@ExtendWith(NoLeaks.class)
class RegmemByteBufTest {
    private final BufferPool pool = BufferPool.builder().name("netty-test").build();
    private final RegmemByteBufAllocator alloc = new RegmemByteBufAllocator(pool);

    @AfterEach
    void closePool() {
        LeakReport report = pool.closeAndReport();
        assertThat(report.clean()).as(report.describe()).isTrue();
    }

    @Test
    void directBuffersArePoolBuffersWithAnAddress() {
        ByteBuf buf = alloc.buffer(100);
        assertThat(buf.isDirect()).isTrue();
        assertThat(buf.hasMemoryAddress()).isTrue();
        assertThat(buf.hasArray()).isFalse();
        assertThat(buf.capacity()).isEqualTo(100);
        assertThat(buf.alloc()).isSameAs(alloc);
        assertThat(alloc.isDirectBufferPooled()).isTrue();
        PooledBuffer pb = alloc.pooledBuffer(buf);
        assertThat(pb.pool()).isSameAs(pool);
        assertThat(buf.memoryAddress()).isEqualTo(pb.address());
        assertThat(pb.chunk().hasUncheckedViews()).as("an address given to Netty retires the chunk").isTrue();
        assertThat(alloc.metric().usedDirectMemory()).isEqualTo(pb.capacity());
        assertThat(pool.stats().liveBuffers()).isEqualTo(1);
        assertThat(buf.release()).isTrue();
        assertThat(pool.stats().liveBuffers()).isZero();
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void ioAndDefaultBuffersAreDirectAndHeapBuffersAreNettys() {
        ByteBuf a = alloc.buffer();
        ByteBuf b = alloc.ioBuffer(10);
        ByteBuf h = alloc.heapBuffer(10);
        assertThat(a.isDirect()).isTrue();
        assertThat(b.isDirect()).isTrue();
        assertThat(h.isDirect()).isFalse();
        assertThat(h.hasArray()).isTrue();
        assertThat(h.alloc()).isNotSameAs(alloc);
        assertThatThrownBy(() -> alloc.pooledBuffer(h)).isInstanceOf(RdmaException.class)
                .hasMessageContaining("is not a buffer of this allocator");
        assertThat(pool.stats().liveBuffers()).isEqualTo(2);
        a.release();
        b.release();
        h.release();
        assertThat(pool.stats().liveBuffers()).isZero();
    }

    @Test
    void primitivesAreBigEndianAndLittleEndianAsNettys() {
        ByteBuf buf = alloc.directBuffer(64);
        ByteBuf ref = Unpooled.buffer(64);
        for (ByteBuf b : new ByteBuf[] {buf, ref}) {
            b.writeByte(0x81).writeShort(0x1234).writeShortLE(0x1234).writeMedium(0xABCDEF).writeMediumLE(0xABCDEF)
                    .writeInt(0xCAFEBABE).writeIntLE(0xCAFEBABE).writeLong(0x0102030405060708L)
                    .writeLongLE(0x0102030405060708L).writeFloat(1.5f).writeDouble(-2.25).writeChar('x');
        }
        assertThat(ByteBufAllocator.DEFAULT).isNotNull();
        assertThat(buf.writerIndex()).isEqualTo(ref.writerIndex());
        for (int i = 0; i < ref.writerIndex(); i++) {
            assertThat(buf.getByte(i)).as("byte %d", i).isEqualTo(ref.getByte(i));
        }
        assertThat(buf.readByte()).isEqualTo((byte) 0x81);
        assertThat(buf.readShort()).isEqualTo((short) 0x1234);
        assertThat(buf.readShortLE()).isEqualTo((short) 0x1234);
        assertThat(buf.readMedium()).isEqualTo(0xFFABCDEF);
        assertThat(buf.readUnsignedMediumLE()).isEqualTo(0xABCDEF);
        assertThat(buf.readInt()).isEqualTo(0xCAFEBABE);
        assertThat(buf.readIntLE()).isEqualTo(0xCAFEBABE);
        assertThat(buf.readLong()).isEqualTo(0x0102030405060708L);
        assertThat(buf.readLongLE()).isEqualTo(0x0102030405060708L);
        assertThat(buf.readFloat()).isEqualTo(1.5f);
        assertThat(buf.readDouble()).isEqualTo(-2.25);
        assertThat(buf.readChar()).isEqualTo('x');
        assertThat(buf.getIntLE(7)).isEqualTo(ref.getIntLE(7));
        buf.readerIndex(0);
        assertThat(buf.equals(ref)).isTrue();
        assertThat(buf.hashCode()).isEqualTo(ref.hashCode());
        assertThat(buf.compareTo(ref)).isZero();
        buf.release();
        ref.release();
    }

    @Test
    void indicesBoundsAndMarksAreNettys() {
        ByteBuf buf = alloc.directBuffer(8, 16);
        assertThat(buf.maxCapacity()).isEqualTo(16);
        buf.writeLong(1);
        assertThatThrownBy(() -> buf.getLong(1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> buf.readerIndex(9)).isInstanceOf(IndexOutOfBoundsException.class);
        buf.markReaderIndex();
        buf.readInt();
        buf.resetReaderIndex();
        assertThat(buf.readerIndex()).isZero();
        buf.writeLong(2); // grows to 16, the max
        assertThat(buf.capacity()).isEqualTo(16);
        assertThatThrownBy(() -> buf.writeByte(3)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> alloc.directBuffer(17, 16)).isInstanceOf(IllegalArgumentException.class);
        buf.release();
    }

    @Test
    void growthStaysInTheSlotThenMovesInsideThePool() {
        ByteBuf buf = alloc.directBuffer(10);
        PooledBuffer first = alloc.pooledBuffer(buf);
        long slot = first.capacity();
        byte[] data = new byte[(int) slot];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 31 + 7);
        }
        buf.writeBytes(data); // fits the slot: same pool buffer
        assertThat(alloc.pooledBuffer(buf)).isSameAs(first);
        assertThat(buf.capacity()).isEqualTo((int) slot);
        buf.writeBytes(data); // past the slot: a new pool buffer, the old one freed
        PooledBuffer second = alloc.pooledBuffer(buf);
        assertThat(second).isNotSameAs(first);
        assertThat(second.pool()).isSameAs(pool);
        assertThat(pool.stats().liveBuffers()).isEqualTo(1);
        assertThat(alloc.metric().usedDirectMemory()).isEqualTo(second.capacity());
        for (int i = 0; i < 2 * data.length; i++) {
            assertThat(buf.getByte(i)).isEqualTo(data[i % data.length]);
        }
        buf.capacity(3); // shrink: indices trimmed, memory kept
        assertThat(buf.writerIndex()).isEqualTo(3);
        assertThat(buf.getByte(2)).isEqualTo(data[2]);
        buf.release();
        assertThat(alloc.metric().usedDirectMemory()).isZero();
    }

    @Test
    void wrappersAreReusedWithTheirHandlesAndNeverShared() {
        ByteBuf a = alloc.directBuffer(16).writeLong(11);
        PooledBuffer first = alloc.pooledBuffer(a);
        a.release();
        ByteBuf again = alloc.directBuffer(16);
        assertThat(alloc.pooledBuffer(again)).isSameAs(first); // the thread's cache hands the handle back ...
        assertThat(core(again)).isSameAs(core(a)); // ... with its wrapper: no garbage
        again.writeLong(12);
        again.capacity(4096); // grows into another handle, which the wrapper takes along
        PooledBuffer grown = alloc.pooledBuffer(again);
        assertThat(grown).isNotSameAs(first);
        ByteBuf b = alloc.directBuffer(16); // the first handle again, now with another wrapper
        assertThat(alloc.pooledBuffer(b)).isSameAs(first);
        assertThat(core(b)).isNotSameAs(core(again));
        b.writeLong(13);
        assertThat(again.getLong(0)).isEqualTo(12);
        assertThat(b.getLong(0)).isEqualTo(13);
        b.release();
        again.release();
        assertThat(pool.stats().liveBuffers()).isZero();
    }

    /** The regmem ByteBuf under Netty's leak-aware wrapper (the default level samples one buffer in 128). */
    private static ByteBuf core(ByteBuf b) {
        ByteBuf c = b;
        while (!(c instanceof RegmemByteBuf)) {
            c = c.unwrap();
        }
        return c;
    }

    @Test
    void growthOfAPinnedBufferIsRefusedAndChangesNothing() {
        ByteBuf buf = alloc.directBuffer(16);
        buf.writeLong(42);
        PooledBuffer pb = alloc.pooledBuffer(buf);
        pb.pin();
        assertThatThrownBy(() -> buf.capacity((int) pb.capacity() * 4)).isInstanceOf(RdmaException.class)
                .extracting(e -> ((RdmaException) e).errno()).isEqualTo(Errno.EBUSY);
        assertThat(alloc.pooledBuffer(buf)).isSameAs(pb);
        assertThat(buf.capacity()).isEqualTo(16);
        assertThat(buf.getLong(0)).isEqualTo(42);
        assertThat(pool.stats().liveBuffers()).isEqualTo(1);
        assertThatThrownBy(buf::release).as("the last release of a pinned buffer is refused")
                .isInstanceOf(RdmaException.class).extracting(e -> ((RdmaException) e).errno()).isEqualTo(Errno.EBUSY);
        assertThat(buf.refCnt()).as("and changes nothing").isEqualTo(1);
        assertThat(buf.getLong(0)).isEqualTo(42);
        pb.unpin();
        assertThat(buf.release()).isTrue();
        assertThat(pool.stats().liveBuffers()).isZero();
    }

    @Test
    void zeroCapacityBuffersGrow() {
        ByteBuf buf = alloc.directBuffer(0);
        assertThat(buf.capacity()).isZero();
        buf.writeBytes("hello".getBytes(StandardCharsets.US_ASCII));
        assertThat(buf.toString(StandardCharsets.US_ASCII)).isEqualTo("hello");
        buf.release();
        assertThat(alloc.directBuffer(0, 0)).isSameAs(alloc.directBuffer(0, 0)); // Netty's empty buffer
    }

    @Test
    void slicesDuplicatesAndCopiesShareOrCopyAsNettys() {
        ByteBuf buf = alloc.directBuffer(32);
        for (int i = 0; i < 32; i++) {
            buf.writeByte(i);
        }
        ByteBuf slice = buf.slice(8, 8);
        assertThat(slice.getByte(0)).isEqualTo((byte) 8);
        slice.setByte(0, 100);
        assertThat(buf.getByte(8)).isEqualTo((byte) 100);
        assertThat(slice.memoryAddress()).isEqualTo(buf.memoryAddress() + 8);
        assertThat(alloc.pooledBuffer(slice)).isSameAs(alloc.pooledBuffer(buf));

        ByteBuf dup = buf.duplicate();
        dup.readerIndex(4);
        assertThat(buf.readerIndex()).isZero();
        assertThat(dup.getByte(8)).isEqualTo((byte) 100);

        ByteBuf retained = buf.retainedSlice(0, 4);
        assertThat(buf.refCnt()).isEqualTo(2);
        ByteBuf copy = buf.copy(8, 4);
        assertThat(copy.alloc()).isSameAs(alloc);
        assertThat(alloc.pooledBuffer(copy)).isNotSameAs(alloc.pooledBuffer(buf));
        copy.setByte(0, 1);
        assertThat(buf.getByte(8)).isEqualTo((byte) 100);

        ByteBuffer nio = buf.nioBuffer(8, 4);
        assertThat(nio.isDirect()).isTrue();
        assertThat(nio.get(0)).isEqualTo((byte) 100);
        assertThat(buf.nioBufferCount()).isEqualTo(1);

        retained.release();
        assertThat(buf.refCnt()).isEqualTo(1);
        copy.release();
        buf.release();
        assertThat(pool.stats().liveBuffers()).isZero();
    }

    @Test
    void compositeBuffersOverRegmemBuffers() {
        CompositeByteBuf composite = alloc.compositeDirectBuffer();
        ByteBuf a = alloc.directBuffer(4).writeInt(1);
        ByteBuf b = alloc.directBuffer(4).writeInt(2);
        composite.addComponents(true, a, b);
        assertThat(composite.readableBytes()).isEqualTo(8);
        assertThat(composite.getLong(0)).isEqualTo(0x0000000100000002L);
        ByteBuf target = alloc.directBuffer(8);
        composite.getBytes(0, target, 0, 8);
        target.writerIndex(8);
        assertThat(target.readLong()).isEqualTo(0x0000000100000002L);
        ByteBuf merged = alloc.directBuffer(16).writeBytes(composite);
        assertThat(merged.getInt(4)).isEqualTo(2);
        composite.release();
        target.release();
        merged.release();
        assertThat(pool.stats().liveBuffers()).isZero();
    }

    @Test
    void retainAndReleaseCountAndTheLastReleaseFreesOnce() {
        ByteBuf buf = alloc.directBuffer(16);
        buf.retain(2);
        assertThat(buf.refCnt()).isEqualTo(3);
        assertThat(buf.release()).isFalse();
        assertThat(buf.release(2)).isTrue();
        assertThat(buf.refCnt()).isZero();
        assertThat(pool.stats().liveBuffers()).isZero();
        assertThatThrownBy(buf::release).isInstanceOf(IllegalReferenceCountException.class);
        assertThatThrownBy(() -> buf.getByte(0)).isInstanceOf(IllegalReferenceCountException.class);
        assertThatThrownBy(() -> buf.writeByte(0)).isInstanceOf(IllegalReferenceCountException.class);
        assertThatThrownBy(buf::retain).isInstanceOf(IllegalReferenceCountException.class);
        assertThatThrownBy(() -> alloc.pooledBuffer(buf)).isInstanceOf(IllegalReferenceCountException.class);
        assertThat(pool.stats().liveBuffers()).isZero();
        // the pool is whole for other users: a new buffer works and is not freed by the stale reference
        ByteBuf next = alloc.directBuffer(16).writeLong(7);
        assertThat(next.getLong(0)).isEqualTo(7);
        assertThat(pool.stats().liveBuffers()).isEqualTo(1);
        next.release();
    }

    @Test
    void bulkCopiesBetweenEveryKindOfBuffer() throws Exception {
        byte[] data = new byte[3000];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i ^ (i >>> 3));
        }
        ByteBuf buf = alloc.directBuffer(data.length).writeBytes(data);
        ByteBuf heap = Unpooled.buffer(data.length);
        ByteBuf jdkDirect = Unpooled.directBuffer(data.length);
        ByteBuf other = alloc.directBuffer(data.length);
        buf.getBytes(0, heap, 0, data.length);
        buf.getBytes(0, jdkDirect, 0, data.length);
        buf.getBytes(0, other, 0, data.length);
        ByteBuffer nio = ByteBuffer.allocate(data.length);
        buf.getBytes(0, nio);
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        buf.getBytes(0, out, data.length);
        assertThat(out.toByteArray()).isEqualTo(data);
        assertThat(nio.array()).isEqualTo(data);
        for (ByteBuf b : new ByteBuf[] {heap, jdkDirect, other}) {
            byte[] got = new byte[data.length];
            b.getBytes(0, got);
            assertThat(got).isEqualTo(data);
        }
        ByteBuf back = alloc.directBuffer(data.length);
        back.setBytes(0, jdkDirect, 0, data.length);
        back.setBytes(0, new java.io.ByteArrayInputStream(data), data.length);
        back.writerIndex(data.length);
        assertThat(back.equals(buf)).isTrue();
        for (ByteBuf b : new ByteBuf[] {buf, heap, jdkDirect, other, back}) {
            b.release();
        }
    }

    @Test
    void keysComeFromThePoolRegistration() {
        try (RdmaDevice device = RdmaDevice.open("soft");
             ProtectionDomain pd = device.allocPd();
             BufferPool registered = BufferPool.builder().name("netty-registered").build()) {
            PoolRegistration registration = pd.register(registered, Access.LOCAL_WRITE, Access.REMOTE_READ);
            RegmemByteBufAllocator keyed = new RegmemByteBufAllocator(registration);
            ByteBuf buf = keyed.directBuffer(64);
            PooledBuffer pb = keyed.pooledBuffer(buf);
            assertThat(keyed.lkey(buf)).isEqualTo(registration.lkey(pb));
            assertThat(keyed.rkey(buf)).isEqualTo(registration.rkey(pb));
            assertThat(keyed.exportRemoteKey(buf)).isNotEmpty();
            ByteBuf plain = alloc.directBuffer(8);
            assertThatThrownBy(() -> alloc.lkey(plain)).isInstanceOf(RdmaException.class)
                    .hasMessageContaining("needs an allocator built over a PoolRegistration");
            assertThatThrownBy(() -> keyed.lkey(plain)).isInstanceOf(RdmaException.class)
                    .hasMessageContaining("is not a buffer of this allocator");
            plain.release();
            buf.release();
            registration.close();
        }
    }

    @Test
    void micrometersNettyAllocatorMetricsReadItUnchanged() {
        io.micrometer.core.instrument.simple.SimpleMeterRegistry registry = new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
        new io.micrometer.core.instrument.binder.netty4.NettyAllocatorMetrics(alloc).bindTo(registry);
        ByteBuf buf = alloc.directBuffer(1000);
        double used = registry.get("netty.allocator.memory.used").tag("memory.type", "direct").gauge().value();
        assertThat(used).isEqualTo((double) alloc.pooledBuffer(buf).capacity());
        buf.release();
        assertThat(registry.get("netty.allocator.memory.used").tag("memory.type", "direct").gauge().value()).isZero();
    }

    @Test
    void constructionIsChecked() {
        BufferPool closed = BufferPool.builder().build();
        closed.close();
        assertThatThrownBy(() -> new RegmemByteBufAllocator(closed)).isInstanceOf(RdmaException.class)
                .hasMessageContaining("is closed");
        assertThatThrownBy(() -> new RegmemByteBufAllocator(pool, null, alloc)).isInstanceOf(RdmaException.class)
                .hasMessageContaining("heap allocator must be Netty's");
    }

    @Test
    void accessAfterThePoolClosedThrowsAndNeverFaults() {
        BufferPool shortLived = BufferPool.builder().name("netty-short").build();
        RegmemByteBufAllocator a = new RegmemByteBufAllocator(shortLived);
        ByteBuf buf = a.directBuffer(64).writeLong(5);
        long address = buf.memoryAddress();
        assertThat(address).isPositive();
        LeakReport report = shortLived.closeAndReport();
        assertThat(report.clean()).isFalse(); // the buffer was still out
        assertThatThrownBy(() -> buf.getLong(0)).isInstanceOf(IllegalStateException.class);
        assertThat(buf.release()).as("a release after the pool closed does not fail").isTrue();
        assertThat(a.metric().usedDirectMemory()).isZero();
        assertThatThrownBy(buf::release).isInstanceOf(IllegalReferenceCountException.class);
    }
}
