package io.regmem.registration;

/**
 * How much the Lincheck model checks explore: each test's own CI budget, bounded so the suite stays
 * fast, scaled up for soak runs. {@code -Dregmem.lincheck.scale=K} multiplies every test's scenarios
 * (iterations) by K (the {@code soak} Maven profile sets 20); {@code -Dregmem.lincheck.iterations}
 * and {@code -Dregmem.lincheck.invocations} set exact values for all tests instead.
 */
public final class LincheckBudget {
    private LincheckBudget() {
    }

    /** Scenarios to generate: the exact value if set, else {@code ciDefault} times the scale. */
    public static int iterations(int ciDefault) {
        return Integer.getInteger("regmem.lincheck.iterations", ciDefault * Math.max(1, Integer.getInteger("regmem.lincheck.scale", 1)));
    }

    /** Interleavings to try per scenario: the exact value if set, else {@code ciDefault}. */
    public static int invocations(int ciDefault) {
        return Integer.getInteger("regmem.lincheck.invocations", ciDefault);
    }
}
