package io.regmem.registration.rw;

import static io.regmem.registration.rw.RwFixture.PAGE;
import static io.regmem.registration.rw.RwInvariantsTest.assertErrno;
import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.Errno;
import io.regmem.core.ScatterList;
import io.regmem.registration.DmaDirection;
import io.regmem.registration.Opcode;
import io.regmem.registration.SignatureAttrs;
import io.regmem.registration.SignatureError;
import io.regmem.registration.testkit.NoLeaks;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Signature (T10-PI, DIF type 1) contexts: insertion, checking, stripping, pass-through and errors. */
@ExtendWith(NoLeaks.class)
public class SignatureTest {
    private static final int BLOCK = 512;
    private static final int BLOCKS = 2 * PAGE / BLOCK; // two data pages
    private static final ValueLayout.OfShort BE_SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    /** A bit-by-bit CRC-16/T10-DIF, independent of the table-driven one under test (T10DifTest uses it too). */
    public static int referenceCrc(MemorySegment s, long off, long len) {
        int crc = 0;
        for (long i = 0; i < len; i++) {
            crc ^= (s.get(ValueLayout.JAVA_BYTE, off + i) & 0xFF) << 8;
            for (int b = 0; b < 8; b++) {
                crc = (crc & 0x8000) != 0 ? ((crc << 1) ^ 0x8BB7) & 0xFFFF : (crc << 1) & 0xFFFF;
            }
        }
        return crc;
    }

    @Test
    void aWriteInsertsTuplesAndAReadChecksAndStripsThem() {
        try (RwFixture f = new RwFixture(Map.of(), 4, 2, true)) {
            ScatterList sg = f.pages(2, PAGE);
            f.fillLocal(sg, 7);
            byte[] original = data(f, sg);
            SignatureAttrs attrs = SignatureAttrs.wireOnly(BLOCK, 0xBEEF, 1000);
            RwContext ctx = new RwContext();
            assertThat(ctx.initSignature(f.qp, 1, sg, 2, null, 0, attrs, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE))
                    .isEqualTo(2);
            assertThat(ctx.wr(0).opcode()).isEqualTo(Opcode.REG_MR_INTEGRITY);
            assertThat(ctx.wr(1).sgeLength(0)).as("wire bytes: data + 8 per block").isEqualTo(2L * PAGE + 8L * BLOCKS);
            ctx.post(f.qp, 1, 1);
            f.expectCompletion(1);
            assertThat(ctx.checkMrStatus()).isNull();
            ctx.destroySignature(f.qp, 1, sg, 2, null, 0, DmaDirection.TO_DEVICE);

            for (int b = 0; b < BLOCKS; b++) {
                long at = (long) b * (BLOCK + 8);
                for (int i = 0; i < BLOCK; i++) {
                    assertThat(f.remote.get(ValueLayout.JAVA_BYTE, at + i)).isEqualTo(original[b * BLOCK + i]);
                }
                assertThat(f.remote.get(BE_SHORT, at + BLOCK) & 0xFFFF).as("guard of block %d", b)
                        .isEqualTo(referenceCrc(f.remote, at, BLOCK));
                assertThat(f.remote.get(BE_SHORT, at + BLOCK + 2) & 0xFFFF).isEqualTo(0xBEEF);
                assertThat(f.remote.get(BE_INT, at + BLOCK + 4)).as("reference tag per block").isEqualTo(1000 + b);
            }

            wipe(f, sg);
            assertThat(ctx.initSignature(f.qp, 1, sg, 2, null, 0, attrs, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE))
                    .as("the MR was left valid by the WRITE: LOCAL_INV first").isEqualTo(3);
            ctx.post(f.qp, 1, 2);
            f.expectCompletion(2);
            assertThat(ctx.checkMrStatus()).isNull();
            ctx.destroySignature(f.qp, 1, sg, 2, null, 0, DmaDirection.FROM_DEVICE);
            assertThat(data(f, sg)).as("the tuples were stripped").isEqualTo(original);
        }
    }

    @Test
    void aCorruptedBlockIsReportedWithItsOffsetAndBothGuards() {
        try (RwFixture f = new RwFixture(Map.of(), 4, 1, true)) {
            ScatterList sg = f.pages(2, PAGE);
            f.fillLocal(sg, 8);
            SignatureAttrs attrs = SignatureAttrs.wireOnly(BLOCK, 1, 0);
            RwContext ctx = new RwContext();
            ctx.initSignature(f.qp, 1, sg, 2, null, 0, attrs, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            ctx.post(f.qp, 1, 1);
            f.expectCompletion(1);
            ctx.destroySignature(f.qp, 1, sg, 2, null, 0, DmaDirection.TO_DEVICE);

            long block5 = 5L * (BLOCK + 8);
            int tupleGuard = f.remote.get(BE_SHORT, block5 + BLOCK) & 0xFFFF;
            f.remote.set(ValueLayout.JAVA_BYTE, block5 + 100, (byte) (f.remote.get(ValueLayout.JAVA_BYTE, block5 + 100) ^ 0x40));
            int corrupted = referenceCrc(f.remote, block5, BLOCK);
            ctx.initSignature(f.qp, 1, sg, 2, null, 0, attrs, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE);
            ctx.post(f.qp, 1, 2);
            f.expectCompletion(2);
            SignatureError err = ctx.checkMrStatus();
            assertThat(err).isEqualTo(new SignatureError(SignatureError.Kind.GUARD, 5L * BLOCK, tupleGuard, corrupted));
            assertThat(ctx.checkMrStatus()).as("reading clears it").isNull();
            ctx.destroySignature(f.qp, 1, sg, 2, null, 0, DmaDirection.FROM_DEVICE);

            // A wrong reference tag (block 3 claims to be block 9).
            f.remote.set(ValueLayout.JAVA_BYTE, block5 + 100, (byte) (f.remote.get(ValueLayout.JAVA_BYTE, block5 + 100) ^ 0x40));
            f.remote.set(BE_INT, 3L * (BLOCK + 8) + BLOCK + 4, 9);
            ctx.initSignature(f.qp, 1, sg, 2, null, 0, attrs, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE);
            ctx.post(f.qp, 1, 3);
            f.expectCompletion(3);
            assertThat(ctx.checkMrStatus()).isEqualTo(new SignatureError(SignatureError.Kind.REF_TAG, 3L * BLOCK, 9, 3));
            ctx.destroySignature(f.qp, 1, sg, 2, null, 0, DmaDirection.FROM_DEVICE);
        }
    }

    @Test
    void tuplesInMemoryPassThroughCheckedBothWays() {
        try (RwFixture f = new RwFixture(Map.of(), 4, 1, true)) {
            ScatterList sg = f.pages(2, PAGE);
            f.fillLocal(sg, 9);
            long protOffset = 40L * PAGE;
            MemorySegment prot = f.local.asSlice(protOffset, 8L * BLOCKS);
            ScatterList protSg = new ScatterList().add(prot);
            for (int b = 0; b < BLOCKS; b++) { // the memory's own tuples, as an application would compute them
                long data = sg.address(b * BLOCK / PAGE) - f.local.address() + (long) (b * BLOCK % PAGE);
                prot.set(BE_SHORT, 8L * b, (short) referenceCrc(f.local, data, BLOCK));
                prot.set(BE_SHORT, 8L * b + 2, (short) 77);
                prot.set(BE_INT, 8L * b + 4, 500 + b);
            }
            byte[] protBefore = prot.toArray(ValueLayout.JAVA_BYTE);
            SignatureAttrs attrs = SignatureAttrs.both(BLOCK, 77, 500);
            RwContext ctx = new RwContext();
            ctx.initSignature(f.qp, 1, sg, 2, protSg, 1, attrs, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            ctx.post(f.qp, 1, 1);
            f.expectCompletion(1);
            assertThat(ctx.checkMrStatus()).isNull();
            ctx.destroySignature(f.qp, 1, sg, 2, protSg, 1, DmaDirection.TO_DEVICE);
            for (int b = 0; b < BLOCKS; b++) {
                assertThat(f.remote.asSlice(b * (BLOCK + 8L) + BLOCK, 8).toArray(ValueLayout.JAVA_BYTE))
                        .isEqualTo(prot.asSlice(8L * b, 8).toArray(ValueLayout.JAVA_BYTE));
            }

            byte[] original = data(f, sg);
            wipe(f, sg);
            prot.fill((byte) 0);
            ctx.initSignature(f.qp, 1, sg, 2, protSg, 1, attrs, f.remoteAddr(), f.rkey(), DmaDirection.FROM_DEVICE);
            ctx.post(f.qp, 1, 2);
            f.expectCompletion(2);
            assertThat(ctx.checkMrStatus()).isNull();
            ctx.destroySignature(f.qp, 1, sg, 2, protSg, 1, DmaDirection.FROM_DEVICE);
            assertThat(data(f, sg)).isEqualTo(original);
            assertThat(prot.toArray(ValueLayout.JAVA_BYTE)).as("tuples split back into the protection list").isEqualTo(protBefore);

            prot.set(BE_SHORT, 8L * 2 + 2, (short) 78); // block 2's app tag goes wrong in memory
            ctx.initSignature(f.qp, 1, sg, 2, protSg, 1, attrs, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            ctx.post(f.qp, 1, 3);
            f.expectCompletion(3);
            assertThat(ctx.checkMrStatus()).isEqualTo(new SignatureError(SignatureError.Kind.APP_TAG, 2L * BLOCK, 78, 77));
            ctx.destroySignature(f.qp, 1, sg, 2, protSg, 1, DmaDirection.TO_DEVICE);
        }
    }

    @Test
    void limitsPoolsAndDestroyVariantsAreEnforced() {
        try (RwFixture f = new RwFixture(Map.of("maxFastRegPageListLen", "2"), 4, 1, true)) {
            SignatureAttrs attrs = SignatureAttrs.wireOnly(BLOCK, 0, 0);
            ScatterList three = f.pages(3, PAGE);
            RwContext ctx = new RwContext();
            assertErrno(() -> ctx.initSignature(f.qp, 1, three, 3, null, 0, attrs, f.remoteAddr(), f.rkey(),
                    DmaDirection.TO_DEVICE), Errno.EINVAL);
            ScatterList partial = new ScatterList().add(f.local.address(), 1000); // not whole blocks
            assertErrno(() -> ctx.initSignature(f.qp, 1, partial, 1, null, 0, attrs, f.remoteAddr(), f.rkey(),
                    DmaDirection.TO_DEVICE), Errno.EINVAL);
            assertThat(f.qp.sigMrs().used()).isZero();
            ScatterList two = f.pages(2, PAGE);
            ctx.initSignature(f.qp, 1, two, 2, null, 0, attrs, f.remoteAddr(), f.rkey(), DmaDirection.TO_DEVICE);
            assertErrno(() -> new RwContext().initSignature(f.qp, 1, two, 2, null, 0, attrs, f.remoteAddr(), f.rkey(),
                    DmaDirection.TO_DEVICE), Errno.EAGAIN);
            assertErrno(() -> ctx.destroy(f.qp, 1, two, 2, DmaDirection.TO_DEVICE), Errno.EINVAL);
            assertErrno(() -> ctx.destroySignature(f.qp, 1, two, 2, two, 1, DmaDirection.TO_DEVICE), Errno.EINVAL);
            ctx.destroySignature(f.qp, 1, two, 2, null, 0, DmaDirection.TO_DEVICE);
            assertErrno(ctx::checkMrStatus, Errno.EINVAL);
        }
        try (RwFixture plain = new RwFixture(Map.of(), 4, 1)) {
            assertErrno(() -> new RwContext().initSignature(plain.qp, 1, plain.pages(1, PAGE), 1, null, 0,
                    SignatureAttrs.wireOnly(BLOCK, 0, 0), plain.remoteAddr(), plain.rkey(), DmaDirection.TO_DEVICE),
                    Errno.EINVAL);
        }
    }

    private static byte[] data(RwFixture f, ScatterList sg) {
        byte[] out = new byte[(int) sg.totalLength()];
        int at = 0;
        for (int i = 0; i < sg.count(); i++) {
            MemorySegment.copy(f.local, ValueLayout.JAVA_BYTE, sg.address(i) - f.local.address(), out, at, (int) sg.length(i));
            at += (int) sg.length(i);
        }
        return out;
    }

    private static void wipe(RwFixture f, ScatterList sg) {
        for (int i = 0; i < sg.count(); i++) {
            f.local.asSlice(sg.address(i) - f.local.address(), sg.length(i)).fill((byte) 0);
        }
    }
}
