package io.regmem.core;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Ends every test with nothing leaked: no pool left open (the way Chronicle's BytesTestCommon
 * checks that nothing is still reserved). Tests close their pools with {@link #closeClean}.
 */
final class NoLeaks implements AfterEachCallback {

    @Override
    public void afterEach(ExtensionContext context) {
        assertThat(BufferPool.openPools()).as("pools left open by %s", context.getDisplayName()).isEmpty();
    }

    /** Closes the pool and asserts that it reported no buffer still out. */
    static void closeClean(BufferPool pool) {
        LeakReport report = pool.closeAndReport();
        assertThat(report.clean()).as(report.describe()).isTrue();
        assertThat(report.bytes()).isZero();
    }
}
