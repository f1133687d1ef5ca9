package io.regmem.registration.ucx;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.registration.testkit.NoLeaks;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The address a ucx HELLO or ACCEPT carries: a worker address and an optional lane offer, read back
 * exactly; anything else (another provider's address, a cut or padded one, absurd lengths, random
 * bytes) is refused with an IOException naming the rule, never another exception.
 */
@ExtendWith(NoLeaks.class)
class UcxHelloTest {

    @Test
    void aWorkerAndAnOfferAreReadBackExactly() throws IOException {
        byte[] worker = new byte[300];
        new SplittableRandom(1).nextBytes(worker);
        byte[] offer = "an offer".getBytes();
        UcxHello back = UcxHello.decode(new UcxHello(worker, offer).encode());
        assertThat(back.worker()).isEqualTo(worker);
        assertThat(back.laneOffer()).isEqualTo(offer);
        UcxHello none = UcxHello.decode(new UcxHello(worker, null).encode());
        assertThat(none.worker()).isEqualTo(worker);
        assertThat(none.laneOffer()).isNull();
    }

    @Test
    void malformedAddressesAreRefusedNamingTheRule() {
        byte[] good = new UcxHello(new byte[16], new byte[8]).encode();
        assertThatThrownBy(() -> UcxHello.decode(new byte[16])).isInstanceOf(IOException.class).hasMessageContaining("bad magic");
        assertThatThrownBy(() -> UcxHello.decode(Arrays.copyOf(good, good.length - 1))).isInstanceOf(IOException.class)
                .hasMessageContaining("cut short");
        assertThatThrownBy(() -> UcxHello.decode(Arrays.copyOf(good, good.length + 3))).isInstanceOf(IOException.class)
                .hasMessageContaining("3 bytes too many");
        byte[] version = good.clone();
        version[5] = 9;
        assertThatThrownBy(() -> UcxHello.decode(version)).isInstanceOf(IOException.class).hasMessageContaining("version 9");
        byte[] huge = good.clone();
        ByteBuffer.wrap(huge).putInt(6, Integer.MAX_VALUE);
        assertThatThrownBy(() -> UcxHello.decode(huge)).isInstanceOf(IOException.class).hasMessageContaining("worker address of");
        byte[] empty = good.clone();
        ByteBuffer.wrap(empty).putInt(6, 0);
        assertThatThrownBy(() -> UcxHello.decode(empty)).isInstanceOf(IOException.class).hasMessageContaining("worker address of 0");
        byte[] bigOffer = good.clone();
        ByteBuffer.wrap(bigOffer).putShort(10 + 16, (short) 0xFFFF);
        assertThatThrownBy(() -> UcxHello.decode(bigOffer)).isInstanceOf(IOException.class).hasMessageContaining("lane offer of 65535");
    }

    @Test
    void randomAndMutatedBytesAreRefusedOrReadNeverAnythingElse() {
        SplittableRandom r = new SplittableRandom(42);
        byte[] good = new UcxHello(new byte[40], new byte[20]).encode();
        for (int i = 0; i < 20_000; i++) {
            byte[] b;
            if ((i & 1) == 0) {
                b = new byte[r.nextInt(80)];
                r.nextBytes(b);
            } else {
                b = Arrays.copyOf(good, Math.max(0, good.length + r.nextInt(-8, 8)));
                for (int k = r.nextInt(4); k >= 0 && b.length > 0; k--) {
                    b[r.nextInt(b.length)] = (byte) r.nextInt(256);
                }
            }
            try {
                UcxHello h = UcxHello.decode(b);
                assertThat(h.worker().length + (h.laneOffer() == null ? 0 : h.laneOffer().length) + 12).isEqualTo(b.length);
            } catch (IOException refused) {
                assertThat(refused.getMessage()).startsWith("the peer's");
            }
        }
    }
}
