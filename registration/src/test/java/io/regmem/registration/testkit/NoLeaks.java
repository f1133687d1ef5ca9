package io.regmem.registration.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.core.BufferPool;
import io.regmem.registration.RdmaDevice;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.lifecycle.AroundPropertyHook;
import net.jqwik.api.lifecycle.PropertyExecutionResult;
import net.jqwik.api.lifecycle.PropertyExecutor;
import net.jqwik.api.lifecycle.PropertyLifecycleContext;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestInstanceFactoryContext;
import org.junit.jupiter.api.extension.TestInstancePreConstructCallback;

/**
 * Ends every registration test with nothing leaked, the way core's tests end (and Chronicle's
 * BytesTestCommon checks that nothing is still reserved): no device left open (a device closes
 * only when every object it made is destroyed, so an open device is a leak of its survivors) and
 * no pool left open. A test that leaks fails with the survivors' report; the leaked devices and
 * devices are then force-closed so that the next test starts clean. Public: test classes of the
 * feature packages (cache, rw, rpc) use it too. JUnit test classes use it with
 * {@code @ExtendWith(NoLeaks.class)}, jqwik property classes with
 * {@code @AddLifecycleHook(NoLeaks.class)}; {@code EveryTestClassChecksForLeaksTest} makes sure
 * every test class does.
 */
public final class NoLeaks implements TestInstancePreConstructCallback, AfterEachCallback, AroundPropertyHook {

    /** Made by JUnit and jqwik. */
    public NoLeaks() {
    }

    /** Before a test class is made (its fields may open devices): skips it if the provider under test is absent. */
    @Override
    public void preConstructTestInstance(TestInstanceFactoryContext factoryContext, ExtensionContext context) {
        Providers.assumeAvailable();
    }

    @Override
    public void afterEach(ExtensionContext context) {
        check(context.getDisplayName());
    }

    /** After a whole property (all its tries): the property fails if anything was left open. */
    @Override
    public PropertyExecutionResult aroundProperty(PropertyLifecycleContext context, PropertyExecutor property) {
        PropertyExecutionResult result = property.execute();
        try {
            Providers.assumeAvailable();
        } catch (org.opentest4j.TestAbortedException absent) {
            return result.mapToAborted(absent);
        }
        try {
            check(context.label());
        } catch (AssertionError e) {
            return result.mapToFailed(e);
        }
        return result;
    }

    /** Asserts that no device and no pool is open; force-closes the devices that are. */
    public static void check(String test) {
        List<String> leaks = new ArrayList<>();
        for (RdmaDevice d : RdmaDevice.openDevices()) {
            leaks.add(d + ": " + d.resources().report());
            d.forceClose();
        }
        for (String ring : openRings()) {
            leaks.add("io_uring " + ring + " left open");
        }
        for (String pool : BufferPool.openPools()) {
            leaks.add("pool " + pool + " left open");
        }
        assertThat(leaks).as("devices and pools left open by %s", test).isEmpty();
        assertThat(io.regmem.registration.soft.SoftProvider.gracePeriod().readerCount()).as("grace-period readers left by %s (one per live QP)", test).isZero();
    }

    /**
     * The io_uring rings left open, when regmem-uring is on the class path (its tests use this
     * extension; this module does not depend on it).
     */
    private static List<String> openRings() {
        if (OPEN_RINGS == null) {
            return List.of();
        }
        try {
            List<String> rings = new ArrayList<>();
            for (Object ring : (Iterable<?>) OPEN_RINGS.invoke(null)) {
                rings.add(String.valueOf(ring));
            }
            return rings;
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("IoRing.openRings() failed", e);
        }
    }

    private static final Method OPEN_RINGS = findOpenRings();

    private static Method findOpenRings() {
        try {
            return Class.forName("io.regmem.registration.uring.IoRing").getMethod("openRings");
        } catch (ClassNotFoundException absent) {
            return null;
        } catch (NoSuchMethodException e) {
            throw new AssertionError("IoRing has no openRings()", e);
        }
    }
}
