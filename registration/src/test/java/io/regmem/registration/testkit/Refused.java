package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;

/** The assertion every refusal test makes: the call throws an {@link RdmaException} with this errno. */
public final class Refused {
    private Refused() {
    }

    /** {@code call} throws an {@link RdmaException} of {@code errno} whose message contains each of {@code parts}. */
    public static void assertRdma(ThrowingCallable call, Errno errno, String... parts) {
        var thrown = assertThatThrownBy(call).isInstanceOf(RdmaException.class)
                .satisfies(e -> assertThat(((RdmaException) e).errno()).isEqualTo(errno));
        if (parts.length > 0) {
            thrown.message().contains(parts);
        }
    }
}
