package io.regmem.netty;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.regmem.core.BufferPool;
import io.regmem.core.LeakReport;
import io.regmem.registration.testkit.NoLeaks;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * Netty's buffer contract by model: any sequence of operations does to a regmem ByteBuf what it does
 * to Netty's own heap buffer (same results, same exceptions, same bytes, indices and capacity),
 * growth across size classes included.
 */
@AddLifecycleHook(NoLeaks.class)
class RegmemByteBufModelPropertyTest {

    @Property(tries = 300)
    void anySequenceBehavesAsNettysHeapBuffer(@ForAll @Size(max = 60) List<@IntRange(min = 0, max = 1 << 20) Integer> ops,
                                              @ForAll @IntRange(min = 0, max = 300) int initial,
                                              @ForAll @IntRange(min = 300, max = 70_000) int max) {
        try (BufferPool pool = BufferPool.builder().name("netty-model").build()) {
            RegmemByteBufAllocator alloc = new RegmemByteBufAllocator(pool);
            ByteBuf ours = alloc.directBuffer(initial, max);
            ByteBuf model = Unpooled.buffer(initial, max);
            ours.setZero(0, ours.capacity()); // neither pool memory nor Netty's arrays are zeroed
            model.setZero(0, model.capacity());
            for (int op : ops) {
                int kind = op % 16;
                int arg = op >>> 4;
                int need = switch (kind) {
                    case 0 -> 1;
                    case 1 -> 4;
                    case 2 -> 8;
                    case 3 -> arg % 5000;
                    case 11 -> arg % 20_000;
                    default -> 0;
                };
                int capacity = model.capacity();
                assertThat(ours.ensureWritable(need, true)).isEqualTo(model.ensureWritable(need, true));
                assertThat(ours.capacity()).isEqualTo(model.capacity());
                if (ours.capacity() > capacity) {
                    // memory a buffer grows into is undefined by Netty's contract (a pooled slot keeps old bytes)
                    ours.setZero(capacity, ours.capacity() - capacity);
                    model.setZero(capacity, model.capacity() - capacity);
                }
                Object a = apply(ours, kind, arg);
                Object b = apply(model, kind, arg);
                assertThat(a).as("op %d(%d) on %s", kind, arg, model).isEqualTo(b);
                assertThat(ours.readerIndex()).isEqualTo(model.readerIndex());
                assertThat(ours.writerIndex()).isEqualTo(model.writerIndex());
                assertThat(ours.capacity()).isEqualTo(model.capacity());
            }
            assertThat(ours.equals(model)).isTrue();
            byte[] whole = new byte[model.capacity()];
            byte[] wholeOurs = new byte[ours.capacity()];
            model.getBytes(0, whole);
            ours.getBytes(0, wholeOurs);
            assertThat(wholeOurs).isEqualTo(whole);
            ours.release();
            model.release();
            assertThat(alloc.metric().usedDirectMemory()).isZero();
            LeakReport report = pool.closeAndReport();
            assertThat(report.clean()).as(report.describe()).isTrue();
        }
    }

    /** One operation; returns its result or the class of what it threw. */
    private static Object apply(ByteBuf b, int kind, int arg) {
        Function<ByteBuf, Object> f = switch (kind) {
            case 0 -> x -> x.writeByte(arg).writerIndex();
            case 1 -> x -> x.writeInt(arg * 2654435761L > 0 ? arg : -arg).writerIndex();
            case 2 -> x -> x.writeLongLE(arg * 0x9E3779B97F4A7C15L).writerIndex();
            case 3 -> x -> x.writeBytes(pattern(arg % 5000, arg)).writerIndex();
            case 4 -> x -> x.readByte();
            case 5 -> x -> x.readInt();
            case 6 -> x -> x.readLongLE();
            case 7 -> x -> x.getShort(arg % (x.capacity() + 8));
            case 8 -> x -> x.setMedium(arg % (x.capacity() + 8), arg).writerIndex();
            case 9 -> x -> x.capacity(Math.min(arg % 9000, x.capacity())).capacity(); // shrink (growth: above)
            case 10 -> x -> x.discardReadBytes().readerIndex();
            case 11 -> x -> x.ensureWritable(arg % 20_000, true);
            case 12 -> x -> {
                int len = Math.min(x.readableBytes(), arg % 64);
                ByteBuf s = x.slice(x.readerIndex(), len);
                if (len > 0) {
                    s.setByte(0, arg);
                }
                return s.readableBytes();
            };
            case 13 -> x -> x.setZero(arg % (x.capacity() + 4), Math.min(arg % 50, 40)).writerIndex();
            case 14 -> x -> x.readerIndex(arg % (x.writerIndex() + 2)).readerIndex();
            default -> x -> x.getUnsignedMediumLE(arg % (x.capacity() + 4));
        };
        try {
            return Objects.toString(f.apply(b));
        } catch (RuntimeException e) {
            return e.getClass().getSimpleName();
        }
    }

    private static byte[] pattern(int length, int seed) {
        byte[] p = new byte[length];
        for (int i = 0; i < length; i++) {
            p[i] = (byte) (seed + i * 131);
        }
        return p;
    }
}
