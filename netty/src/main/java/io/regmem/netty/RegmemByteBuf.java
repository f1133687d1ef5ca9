package io.regmem.netty;

import io.netty.buffer.AbstractReferenceCountedByteBuf;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.regmem.core.PooledBuffer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ScatteringByteChannel;

/**
 * A direct {@link ByteBuf} over one {@link PooledBuffer}. Reads and writes go through the buffer's
 * checked {@link MemorySegment} (bounds, and the pool's lifetime: an access after the pool closed
 * throws, it never faults); {@link #memoryAddress()} hands the address to Netty's own by-address
 * code and so marks the chunk for retirement (see {@link PooledBuffer#uncheckedAddress()}).
 *
 * <p>Wrappers are recycled with the pool's handles: each {@link PooledBuffer} handle keeps its wrapper
 * as its {@linkplain PooledBuffer#attachment() attachment}, made on the handle's first use by this
 * module and reused each time the pool hands the handle out again, on any thread (Netty's
 * {@code Recycler} recycles only on its own event-loop threads). A steady state of allocate, write,
 * release therefore creates no garbage. Growth past the slot's capacity allocates a new slot from
 * the same pool, copies, frees the old one and swaps the two handles' wrappers, so that each handle
 * still has one wrapper and each wrapper one handle.
 */
final class RegmemByteBuf extends AbstractReferenceCountedByteBuf {
    private static final ValueLayout.OfShort SHORT_BE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfShort SHORT_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT_BE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt INT_LE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG_BE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong LONG_LE = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int COPY_CHUNK = 8192;

    private RegmemByteBufAllocator alloc;
    private PooledBuffer buffer;
    /** {@link #buffer}'s checked segment, spanning the slot's capacity. */
    private MemorySegment segment;
    /** What {@link #capacity()} says: at most the slot's capacity. */
    private int length;

    private RegmemByteBuf() {
        super(0);
    }

    /** The handle's wrapper (made on its first use), set up over a fresh buffer of the allocator's pool. */
    static RegmemByteBuf newInstance(RegmemByteBufAllocator alloc, PooledBuffer buffer, int initialCapacity, int maxCapacity) {
        RegmemByteBuf buf = wrapperOf(buffer);
        buf.alloc = alloc;
        buf.attach(buffer);
        buf.length = initialCapacity;
        buf.maxCapacity(maxCapacity);
        buf.resetRefCnt();
        buf.setIndex(0, 0);
        buf.markReaderIndex();
        buf.markWriterIndex();
        return buf;
    }

    /** The wrapper kept with the handle, or a new one kept there from now on. */
    private static RegmemByteBuf wrapperOf(PooledBuffer buffer) {
        if (buffer.attachment() instanceof RegmemByteBuf w) {
            return w;
        }
        RegmemByteBuf w = new RegmemByteBuf();
        buffer.attachment(w); // (another library's attachment, if any, is replaced: the owner decides)
        return w;
    }

    private void attach(PooledBuffer b) {
        buffer = b;
        segment = b.segment();
    }

    /** The pooled buffer under this ByteBuf now (it changes when the capacity grows past the slot). */
    PooledBuffer pooledBuffer() {
        ensureAccessible();
        return buffer;
    }

    RegmemByteBufAllocator owner() {
        return alloc;
    }

    @Override
    protected void deallocate() {
        PooledBuffer b = buffer;
        MemorySegment s = segment;
        RegmemByteBufAllocator a = alloc;
        buffer = null; // before the free: once freed, the handle (and this wrapper) may be another thread's
        segment = null;
        alloc = null;
        try {
            a.free(b); // the wrapper stays with the handle for its next owner
        } catch (RuntimeException | Error e) {
            buffer = b; // refused (pinned: EBUSY): still the caller's, with one reference, as before
            segment = s;
            alloc = a;
            setRefCnt(1);
            throw e;
        }
    }

    // ---- shape ---------------------------------------------------------------------------------

    @Override
    public int capacity() {
        return length;
    }

    @Override
    public ByteBuf capacity(int newCapacity) {
        checkNewCapacity(newCapacity);
        if (newCapacity <= buffer.capacity()) {
            length = newCapacity; // inside the slot: no copy, no new memory
            trimIndicesToCapacity(newCapacity);
            return this;
        }
        PooledBuffer old = buffer;
        PooledBuffer grown = alloc.allocatePooled(newCapacity);
        Object grownWrapper = grown.attachment();
        try {
            MemorySegment.copy(segment, 0, grown.segment(), 0, length);
            old.attachment(grownWrapper); // the handles swap wrappers: one wrapper per handle
            try {
                alloc.free(old);
            } catch (RuntimeException | Error e) {
                old.attachment(this); // refused (pinned): undo, nothing has changed
                throw e;
            }
        } catch (RuntimeException | Error e) {
            alloc.free(grown); // the old buffer stays as it was
            throw e;
        }
        grown.attachment(this);
        attach(grown);
        length = newCapacity;
        return this;
    }

    @Override
    public ByteBufAllocator alloc() {
        return alloc;
    }

    /** Big-endian, as every {@code ByteBuf} (deprecated with Netty's own: use the {@code *LE} accessors). */
    @Deprecated
    @Override
    public ByteOrder order() {
        return ByteOrder.BIG_ENDIAN;
    }

    @Override
    public ByteBuf unwrap() {
        return null;
    }

    @Override
    public boolean isDirect() {
        return true;
    }

    @Override
    public boolean isContiguous() {
        return true;
    }

    @Override
    public boolean hasArray() {
        return false;
    }

    @Override
    public byte[] array() {
        throw new UnsupportedOperationException("direct buffer");
    }

    @Override
    public int arrayOffset() {
        throw new UnsupportedOperationException("direct buffer");
    }

    @Override
    public boolean hasMemoryAddress() {
        return true;
    }

    @Override
    public long memoryAddress() {
        ensureAccessible();
        return buffer.uncheckedAddress();
    }

    // ---- primitives ----------------------------------------------------------------------------

    @Override
    protected byte _getByte(int index) {
        return segment.get(ValueLayout.JAVA_BYTE, index);
    }

    @Override
    protected short _getShort(int index) {
        return segment.get(SHORT_BE, index);
    }

    @Override
    protected short _getShortLE(int index) {
        return segment.get(SHORT_LE, index);
    }

    @Override
    protected int _getUnsignedMedium(int index) {
        return (_getByte(index) & 0xff) << 16 | (_getByte(index + 1) & 0xff) << 8 | _getByte(index + 2) & 0xff;
    }

    @Override
    protected int _getUnsignedMediumLE(int index) {
        return _getByte(index) & 0xff | (_getByte(index + 1) & 0xff) << 8 | (_getByte(index + 2) & 0xff) << 16;
    }

    @Override
    protected int _getInt(int index) {
        return segment.get(INT_BE, index);
    }

    @Override
    protected int _getIntLE(int index) {
        return segment.get(INT_LE, index);
    }

    @Override
    protected long _getLong(int index) {
        return segment.get(LONG_BE, index);
    }

    @Override
    protected long _getLongLE(int index) {
        return segment.get(LONG_LE, index);
    }

    @Override
    protected void _setByte(int index, int value) {
        segment.set(ValueLayout.JAVA_BYTE, index, (byte) value);
    }

    @Override
    protected void _setShort(int index, int value) {
        segment.set(SHORT_BE, index, (short) value);
    }

    @Override
    protected void _setShortLE(int index, int value) {
        segment.set(SHORT_LE, index, (short) value);
    }

    @Override
    protected void _setMedium(int index, int value) {
        _setByte(index, value >>> 16);
        _setByte(index + 1, value >>> 8);
        _setByte(index + 2, value);
    }

    @Override
    protected void _setMediumLE(int index, int value) {
        _setByte(index, value);
        _setByte(index + 1, value >>> 8);
        _setByte(index + 2, value >>> 16);
    }

    @Override
    protected void _setInt(int index, int value) {
        segment.set(INT_BE, index, value);
    }

    @Override
    protected void _setIntLE(int index, int value) {
        segment.set(INT_LE, index, value);
    }

    @Override
    protected void _setLong(int index, long value) {
        segment.set(LONG_BE, index, value);
    }

    @Override
    protected void _setLongLE(int index, long value) {
        segment.set(LONG_LE, index, value);
    }

    @Override
    public ByteBuf setZero(int index, int length) {
        checkIndex(index, length);
        segment.asSlice(index, length).fill((byte) 0);
        return this;
    }

    // ---- bulk ----------------------------------------------------------------------------------

    @Override
    public ByteBuf getBytes(int index, ByteBuf dst, int dstIndex, int length) {
        checkDstIndex(index, length, dstIndex, dst.capacity());
        if (dst instanceof RegmemByteBuf r) {
            r.ensureAccessible();
            MemorySegment.copy(segment, index, r.segment, dstIndex, length);
        } else if (dst.hasArray()) {
            getBytes(index, dst.array(), dst.arrayOffset() + dstIndex, length);
        } else if (dst.nioBufferCount() > 0) {
            for (ByteBuffer bb : dst.nioBuffers(dstIndex, length)) {
                int n = bb.remaining();
                getBytes(index, bb);
                index += n;
            }
        } else {
            dst.setBytes(dstIndex, this, index, length);
        }
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, byte[] dst, int dstIndex, int length) {
        checkDstIndex(index, length, dstIndex, dst.length);
        MemorySegment.copy(segment, ValueLayout.JAVA_BYTE, index, dst, dstIndex, length);
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, ByteBuffer dst) {
        int n = dst.remaining();
        checkIndex(index, n);
        dst.put(internalNio(index, n));
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, OutputStream out, int length) throws IOException {
        checkIndex(index, length);
        byte[] tmp = new byte[Math.min(length, COPY_CHUNK)];
        while (length > 0) {
            int n = Math.min(length, tmp.length);
            MemorySegment.copy(segment, ValueLayout.JAVA_BYTE, index, tmp, 0, n);
            out.write(tmp, 0, n);
            index += n;
            length -= n;
        }
        return this;
    }

    @Override
    public int getBytes(int index, GatheringByteChannel out, int length) throws IOException {
        checkIndex(index, length);
        return out.write(internalNio(index, length));
    }

    @Override
    public int getBytes(int index, FileChannel out, long position, int length) throws IOException {
        checkIndex(index, length);
        return out.write(internalNio(index, length), position);
    }

    @Override
    public ByteBuf setBytes(int index, ByteBuf src, int srcIndex, int length) {
        checkSrcIndex(index, length, srcIndex, src.capacity());
        if (src instanceof RegmemByteBuf r) {
            r.ensureAccessible();
            MemorySegment.copy(r.segment, srcIndex, segment, index, length);
        } else if (src.hasArray()) {
            setBytes(index, src.array(), src.arrayOffset() + srcIndex, length);
        } else if (src.nioBufferCount() > 0) {
            for (ByteBuffer bb : src.nioBuffers(srcIndex, length)) {
                int n = bb.remaining();
                setBytes(index, bb);
                index += n;
            }
        } else {
            src.getBytes(srcIndex, this, index, length);
        }
        return this;
    }

    @Override
    public ByteBuf setBytes(int index, byte[] src, int srcIndex, int length) {
        checkSrcIndex(index, length, srcIndex, src.length);
        MemorySegment.copy(src, srcIndex, segment, ValueLayout.JAVA_BYTE, index, length);
        return this;
    }

    @Override
    public ByteBuf setBytes(int index, ByteBuffer src) {
        int n = src.remaining();
        checkIndex(index, n);
        internalNio(index, n).put(src);
        return this;
    }

    @Override
    public int setBytes(int index, InputStream in, int length) throws IOException {
        checkIndex(index, length);
        byte[] tmp = new byte[Math.min(length, COPY_CHUNK)];
        int total = 0;
        while (total < length) {
            int n = in.read(tmp, 0, Math.min(length - total, tmp.length));
            if (n < 0) {
                return total == 0 ? -1 : total;
            }
            if (n == 0) {
                break;
            }
            MemorySegment.copy(tmp, 0, segment, ValueLayout.JAVA_BYTE, index + total, n);
            total += n;
        }
        return total;
    }

    @Override
    public int setBytes(int index, ScatteringByteChannel in, int length) throws IOException {
        checkIndex(index, length);
        try {
            return in.read(internalNio(index, length));
        } catch (ClosedChannelException e) {
            return -1;
        }
    }

    @Override
    public int setBytes(int index, FileChannel in, long position, int length) throws IOException {
        checkIndex(index, length);
        try {
            return in.read(internalNio(index, length), position);
        } catch (ClosedChannelException e) {
            return -1;
        }
    }

    @Override
    public ByteBuf copy(int index, int length) {
        checkIndex(index, length);
        ByteBuf copy = alloc.directBuffer(length, maxCapacity());
        return copy.writeBytes(this, index, length);
    }

    // ---- NIO views -----------------------------------------------------------------------------

    @Override
    public int nioBufferCount() {
        return 1;
    }

    @Override
    public ByteBuffer nioBuffer(int index, int length) {
        checkIndex(index, length);
        return segment.asSlice(index, length).asByteBuffer();
    }

    @Override
    public ByteBuffer internalNioBuffer(int index, int length) {
        checkIndex(index, length);
        return internalNio(index, length);
    }

    @Override
    public ByteBuffer[] nioBuffers(int index, int length) {
        return new ByteBuffer[] {nioBuffer(index, length)};
    }

    /** The pooled buffer's own ByteBuffer (one per handle, reused), set to [index, index + length). */
    private ByteBuffer internalNio(int index, int length) {
        ByteBuffer bb = buffer.asByteBuffer();
        bb.clear().position(index).limit(index + length);
        return bb;
    }
}
